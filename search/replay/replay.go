package replay

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"

	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

// Replayer answers configurations with recorded measurements, as a tuner
// running them would have recorded them. Its draws depend only on the seed,
// the configuration and how often that configuration was asked for, so two
// strategies that run the same configuration under the same seed see the
// same measurement (common random numbers: their comparison is not blurred
// by luck). A Replayer is not safe for concurrent use.
type Replayer struct {
	s      *Surface
	seed   uint64
	visits map[string]int
	// restarts: answer from every recorded run, the reference runs too
	// (Restarts).
	restarts bool
	// EarlyStop: a run over the SLO's latency or error budget is answered
	// as early-stopped, as the probe ends such a run in the tuner (it
	// stops once the breach is certain; a surface records whole runs).
	// Its figures are kept; a strategy reads an early-stopped trial as the
	// tuner hands it over.
	EarlyStop bool
}

// Replay returns a replayer for seed that answers from the sweep's runs:
// the noise a strategy meets (the reference runs are never replayed to
// one).
func (s *Surface) Replay(seed uint64) *Replayer {
	return &Replayer{s: s, seed: seed, visits: map[string]int{}}
}

// Restarts returns a replayer for seed that answers from every recorded
// run of a configuration, its reference runs included: each is a fresh
// restart of it, as the confirmation stage takes them. A contender's
// reference runs are most of what is known of it (16 of 19 runs), and
// they are what its truth is the mean of; a confirmation that redrew only
// the sweep's three could never see a restart that breaks the SLO when
// those three happened not to.
func (s *Surface) Restarts(seed uint64) *Replayer {
	r := s.Replay(seed)
	r.restarts = true
	return r
}

// Run returns the trial a tuner would record for c: rejected when c breaks
// a hard rule, failed when the drawn run did not load, succeeded otherwise
// with the drawn run's QPS, P99 and error rate and the feasibility verdict
// for that single (noisy) run. It returns ErrNotRecorded for a runnable
// configuration the surface lacks.
func (r *Replayer) Run(c search.Config) (search.Trial, error) {
	tr := search.Trial{Config: c.Clone()}
	if vs := r.s.space.Check(c); len(vs) > 0 {
		tr.Outcome = search.Rejected
		return tr, nil
	}
	i, ok := r.s.index[c.Key()]
	if !ok {
		return search.Trial{}, fmt.Errorf("%w: %s", ErrNotRecorded, c)
	}
	runs := r.s.points[i].swept()
	if r.restarts {
		runs = r.s.points[i].Runs
	}
	k := c.Key()
	visit := r.visits[k]
	r.visits[k]++
	h := fnv.New64a()
	h.Write([]byte(k))
	h.Write([]byte("#" + strconv.Itoa(visit)))
	m := runs[rand.New(rand.NewPCG(r.seed, h.Sum64())).IntN(len(runs))]
	if m.failed() {
		tr.Outcome = search.Failed
		return tr, nil
	}
	tr.Outcome = search.Succeeded
	tr.Measured = true
	tr.QPS = m.QPS
	tr.P99 = m.P99()
	tr.ErrorRate = m.ErrorRate
	if r.s.Header.Objective == objective.MaxCapacity {
		// A capacity is the highest rate whose step met the SLO: the run
		// is feasible when some rate did.
		tr.Value = m.capacity()
		tr.Feasible = tr.Value > 0
		return tr, nil
	}
	tr.Feasible = r.s.feasible(m.QPS, tr.P99, m.ErrorRate)
	tr.Value = r.s.value(m.QPS, tr.P99)
	// Infeasible for the SLO's latency or errors, not only a rate the
	// probe does not stop on.
	if r.EarlyStop && !r.s.constraints().Meets(tr.P99, tr.ErrorRate, nil) {
		tr.Outcome = search.EarlyStopped
	}
	return tr, nil
}

// swept is the point's runs from the sweep itself, without the reference
// runs (all of them if it has only those).
func (p Point) swept() []Measurement {
	out := make([]Measurement, 0, len(p.Runs))
	for _, m := range p.Runs {
		if !m.Reference {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return p.Runs
	}
	return out
}
