package report

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/estimate"
	// The study's search.strategy is checked against the strategies
	// package search declares; the report reads studies, so it links them.
	_ "github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/store"
)

// Store is what Build reads; *store.DB provides it, read-only or not.
type Store interface {
	Study(ctx context.Context, name string) (*store.Study, error)
	Runs(ctx context.Context, study string) ([]store.Run, error)
	Trials(ctx context.Context, study string, run uint64) ([]store.Trial, error)
	Trial(ctx context.Context, study string, run, seq uint64) (*store.Trial, error)
	StudyTrials(ctx context.Context, study string) ([]store.Trial, error)
	Recommendations(ctx context.Context, study string) ([]store.Recommendation, error)
}

var _ Store = (*store.DB)(nil)

// Point classes: how a trial is drawn in the trials plot. Every trial has
// exactly one.
const (
	ClassFeasible   = "feasible"   // measured and met the SLO
	ClassInfeasible = "infeasible" // measured and broke the SLO (early stops included)
	ClassRejected   = "rejected"   // a hard rule forbade running it
	ClassFailed     = "failed"     // started but measured nothing usable (failed, invalid)
	ClassOther      = "unfinished" // suggested, running or interrupted: not drawn
)

// Report is everything the views of one run show. It is plain data: its
// JSON encoding is `batchtune report --format json`.
type Report struct {
	Generated time.Time `json:"generated"`
	Study     Facts     `json:"study"`
	Run       store.Run `json:"run"`
	// Runs is how many runs the study has.
	Runs int `json:"runs"`
	// Trials is every trial of the run in order, with derived figures.
	Trials []Trial `json:"trials"`
	// Verdict is the run's recommendation; nil when it made none, and
	// then NoVerdict says why.
	Verdict   *Verdict `json:"verdict,omitempty"`
	NoVerdict string   `json:"no_verdict,omitempty"`
	// Candidates are the confirmation stage's configurations, each with
	// its repeats' objectives and the interval on their mean; the
	// baseline is among them (Role baseline).
	Candidates []Candidate `json:"candidates,omitempty"`
	// Pareto lists the Seq of the measured trials no other measured trial
	// beats on both throughput and SLO-quantile latency, by latency.
	Pareto []uint64 `json:"pareto,omitempty"`
	// Winner is the Seq of the trial drawn as the winner: the best search
	// trial of the recommended configuration; 0 when none.
	Winner uint64 `json:"winner,omitempty"`
	// Convergence is the best feasible objective after each trial.
	Convergence []ConvergencePoint `json:"convergence,omitempty"`
	// ConfirmFrom is the Seq of the first confirmation trial, 0 when the
	// run never reached that stage.
	ConfirmFrom uint64 `json:"confirm_from,omitempty"`
	// RateCurves hold, for trials whose measurement recorded several load
	// steps, latency against achieved rate; empty when none did.
	RateCurves []RateCurve `json:"rate_curves,omitempty"`
	// History is the study's re-tune history; nil for a study with one
	// one-shot run.
	History *History `json:"history,omitempty"`
	Machine Machine  `json:"machine"`
	Timing  Timing   `json:"timing"`
}

// Facts are the study's settings as the run used them.
type Facts struct {
	Name string `json:"name"`
	// Objective is "max_throughput" or "min_latency"; Maximize says which
	// way is better.
	Objective string `json:"objective"`
	Maximize  bool   `json:"maximize"`
	// Quantile names the SLO's quantile ("P99"); SLOLatency its bound.
	Quantile   string        `json:"quantile"`
	QuantileQ  float64       `json:"quantile_q"`
	SLOLatency time.Duration `json:"slo_latency_ns"`
	ErrorRate  float64       `json:"slo_error_rate"`
	// Target and Load describe what was measured, in words.
	Target     string   `json:"target"`
	Load       string   `json:"load"`
	Strategy   string   `json:"strategy"`
	Parameters []string `json:"parameters"`
	Confidence float64  `json:"confidence"`
	// SpecProblem is set when the stored spec could not be read (a newer
	// or broken file): the facts above then hold defaults.
	SpecProblem string `json:"spec_problem,omitempty"`
}

// Trial is a stored trial with what the views derive from it.
type Trial struct {
	store.Trial
	Class string `json:"class"`
	// Latency is the trial's latency at the SLO's quantile; 0 when it
	// measured nothing.
	Latency time.Duration `json:"latency_ns,omitempty"`
	// Setup is restart + ready + warmup, 0 when it never got to measure.
	Setup time.Duration `json:"setup_ns,omitempty"`
	// Steps are the load steps its measurement recorded, if several.
	Steps []Step `json:"steps,omitempty"`
}

// Step is one load step of a measurement: the rate offered and achieved
// and the latency at the SLO's quantile.
type Step struct {
	Offered  float64       `json:"offered"`
	Achieved float64       `json:"achieved"`
	Latency  time.Duration `json:"latency_ns"`
}

// RateCurve is one trial's latency against rate.
type RateCurve struct {
	Seq    uint64        `json:"seq"`
	Config []store.Param `json:"config"`
	Steps  []Step        `json:"steps"`
}

// Verdict is the run's recommendation.
type Verdict struct {
	store.Recommendation
	// Why is the tuner's explanation: batch size, queueing share, latency.
	Why string `json:"why"`
}

// Candidate is one configuration measured in the confirmation stage.
type Candidate struct {
	Role    string        `json:"role"`
	Config  []store.Param `json:"config"`
	Samples []float64     `json:"samples"`
	// Repeats ran; Feasible of them met the SLO.
	Repeats  int     `json:"repeats"`
	Feasible int     `json:"feasible"`
	Mean     float64 `json:"mean"`
	// Low and High bound the mean at the study's confidence; equal to
	// Mean when fewer than two samples give no interval (Bounded false).
	Low     float64 `json:"low"`
	High    float64 `json:"high"`
	Bounded bool    `json:"bounded"`
	// Winner marks the recommended configuration.
	Winner bool `json:"winner,omitempty"`
}

// ConvergencePoint is the best feasible objective after trial Seq; Best
// is nil until a feasible trial was seen.
type ConvergencePoint struct {
	Seq       uint64   `json:"seq"`
	Role      string   `json:"role"`
	Objective *float64 `json:"objective,omitempty"`
	Best      *float64 `json:"best,omitempty"`
}

// History is a study's life across runs: each run, each recommendation
// (accepted or kept out), and the incumbent's re-measurements.
type History struct {
	Runs            []store.Run            `json:"runs"`
	Recommendations []store.Recommendation `json:"recommendations"`
	// Remeasured are the incumbent's re-measurements by warm starts.
	Remeasured []Remeasure `json:"remeasured,omitempty"`
}

// Remeasure is one re-measurement of the incumbent.
type Remeasure struct {
	Run       uint64    `json:"run"`
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"at"`
	Objective float64   `json:"objective"`
	Feasible  bool      `json:"feasible"`
}

// Machine says what the measurements ran on, as the load generator saw it.
type Machine struct {
	GeneratorCores int    `json:"generator_cores,omitempty"`
	Transport      string `json:"transport,omitempty"`
	Connections    int    `json:"connections,omitempty"`
}

// Timing is where the run's time went.
type Timing struct {
	Elapsed time.Duration `json:"elapsed_ns"`
	// MeanSetup and MeanMeasure are per trial that measured.
	MeanSetup   time.Duration `json:"mean_setup_ns,omitempty"`
	MeanMeasure time.Duration `json:"mean_measure_ns,omitempty"`
	Measured    int           `json:"measured"`
}

// Build reads run runID of study (0: the latest) and derives its Report.
// now stamps it.
func Build(ctx context.Context, db Store, study string, runID uint64, now time.Time) (*Report, error) {
	st, err := db.Study(ctx, study)
	if err != nil {
		return nil, err
	}
	runs, err := db.Runs(ctx, study)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoRuns, study)
	}
	run := runs[len(runs)-1]
	if runID != 0 {
		i := slices.IndexFunc(runs, func(r store.Run) bool { return r.ID == runID })
		if i < 0 {
			return nil, fmt.Errorf("%w: run %d of study %s", store.ErrNotFound, runID, study)
		}
		run = runs[i]
	}
	listed, err := db.Trials(ctx, study, run.ID)
	if err != nil {
		return nil, err
	}
	recs, err := db.Recommendations(ctx, study)
	if err != nil {
		return nil, err
	}
	rep := &Report{Generated: now.UTC(), Study: facts(st), Run: run, Runs: len(runs)}
	for _, lt := range listed {
		// Listings leave measurements out; the machine facts and load
		// steps are in them.
		tr := lt
		if full, err := db.Trial(ctx, study, run.ID, lt.Seq); err == nil {
			tr = *full
		}
		rep.Trials = append(rep.Trials, derive(tr, rep.Study.QuantileQ, &rep.Machine))
	}
	for _, r := range recs {
		if r.Run == run.ID {
			rep.Verdict = &Verdict{Recommendation: r, Why: r.Note}
		}
	}
	if rep.Verdict == nil {
		rep.NoVerdict = run.Detail
		if rep.NoVerdict == "" && run.State.Unfinished() {
			rep.NoVerdict = "the run has not finished"
		}
	}
	rep.Candidates = candidates(rep.Trials, rep.Study.Confidence, rep.Verdict)
	rep.Pareto = pareto(rep.Trials)
	rep.Winner = winner(rep.Trials, rep.Verdict, rep.Study.Maximize)
	rep.Convergence, rep.ConfirmFrom = convergence(rep.Trials, rep.Study.Maximize)
	for _, t := range rep.Trials {
		if len(t.Steps) > 1 {
			rep.RateCurves = append(rep.RateCurves, RateCurve{Seq: t.Seq, Config: t.Config, Steps: t.Steps})
		}
	}
	rep.Timing = timing(run, rep.Trials, now)
	if h, err := history(ctx, db, study, runs, recs); err != nil {
		return nil, err
	} else {
		rep.History = h
	}
	return rep, nil
}

// facts reads the stored spec. A spec this build cannot read still gives
// a report: its figures are what the store holds.
func facts(st *store.Study) Facts {
	f := Facts{Name: st.Name}
	s, err := configs.ParseStudy(st.Name+".yaml", []byte(st.Spec))
	if err != nil {
		s = configs.DefaultStudy()
		f.SpecProblem = err.Error()
	}
	f.Objective = fmt.Sprint(s.Objective)
	f.Maximize = f.Objective != "min_latency"
	f.QuantileQ = s.SLO.Quantile
	if f.QuantileQ == 0 {
		f.QuantileQ = 0.99
	}
	f.Quantile = "P" + strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", 100*f.QuantileQ), "0"), ".")
	f.SLOLatency = s.SLO.Latency.D()
	f.ErrorRate = s.SLO.ErrorRate
	f.Target = fmt.Sprintf("model %s on the %s runtime", s.Target.Model.Name, s.Target.Runtime)
	l := s.Load
	switch l.Mode {
	case "open":
		f.Load = fmt.Sprintf("open loop, %g req/s (%s arrivals)", l.Rate, l.Arrival)
	default:
		f.Load = fmt.Sprintf("closed loop, %d concurrent requests", l.Concurrency)
	}
	f.Load += fmt.Sprintf(" over %s, measured %s to %s", l.Transport, l.MinDuration, l.MaxDuration)
	f.Strategy = s.Search.Strategy
	for _, p := range s.Space {
		f.Parameters = append(f.Parameters, p.Name)
	}
	f.Confidence = s.Confirmation.Confidence
	return f
}

// measurement is the part of a stored probe result the report reads. The
// Steps field is read when a measurement recorded several load steps.
type measurement struct {
	Transport   string `json:"transport"`
	Connections int    `json:"connections"`
	Generator   struct {
		Cores int `json:"cores"`
	} `json:"generator"`
	Duration time.Duration `json:"duration_ns"`
	Steps    []struct {
		OfferedRate float64      `json:"offered_rate"`
		QPS         float64      `json:"qps"`
		Latency     percentilesM `json:"latency"`
	} `json:"steps"`
}

type percentilesM struct {
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P95  time.Duration `json:"p95_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p99_9_ns"`
}

func (p percentilesM) at(q float64) time.Duration {
	return pick(q, p.P50, p.P90, p.P95, p.P99, p.P999)
}

// pick chooses the percentile nearest q among the ones recorded.
func pick(q float64, p50, p90, p95, p99, p999 time.Duration) time.Duration {
	switch {
	case q <= 0.5:
		return p50
	case q <= 0.9:
		return p90
	case q <= 0.95:
		return p95
	case q <= 0.99:
		return p99
	}
	return p999
}

// ClassOf says how a trial is drawn.
func ClassOf(t store.Trial) string {
	switch t.State {
	case store.TrialRejected:
		return ClassRejected
	case store.TrialFailed, store.TrialInvalid:
		return ClassFailed
	case store.TrialSucceeded, store.TrialEarlyStopped:
		if t.Objective == nil {
			return ClassFailed
		}
		if t.Feasible {
			return ClassFeasible
		}
		return ClassInfeasible
	}
	return ClassOther
}

func derive(tr store.Trial, q float64, m *Machine) Trial {
	t := Trial{Trial: tr, Class: ClassOf(tr)}
	if t.Class == ClassFeasible || t.Class == ClassInfeasible {
		s := tr.Summary
		t.Latency = pick(q, s.P50, s.P90, s.P95, s.P99, s.P999)
	}
	t.Setup, _ = SetupTime(tr)
	if len(tr.Measurement) > 0 {
		var ms measurement
		if json.Unmarshal(tr.Measurement, &ms) == nil {
			if m.GeneratorCores == 0 {
				m.GeneratorCores, m.Transport, m.Connections = ms.Generator.Cores, ms.Transport, ms.Connections
			}
			for _, s := range ms.Steps {
				t.Steps = append(t.Steps, Step{Offered: s.OfferedRate, Achieved: s.QPS, Latency: s.Latency.at(q)})
			}
		}
	}
	if c := tr.Capacity; c != nil && len(t.Steps) == 0 {
		// A capacity trial's steps, in rate order: its rate–latency curve.
		for _, s := range c.Steps {
			lat := s.Quantile // the SLO's quantile
			if lat == 0 {
				lat = pick(q, s.P50, s.P90, s.P99, s.P99, s.P99)
			}
			t.Steps = append(t.Steps, Step{Offered: s.Offered, Achieved: s.Achieved, Latency: lat})
		}
		slices.SortFunc(t.Steps, func(a, b Step) int { return cmp.Compare(a.Offered, b.Offered) })
	}
	t.Measurement = nil // the views never show it raw; JSON stays small
	return t
}

// SetupTime is a trial's restart + ready + warmup: from starting to
// measuring. ok is false when the trial never reached measuring.
func SetupTime(tr store.Trial) (time.Duration, bool) {
	var start, measuring time.Time
	for _, p := range tr.Phases {
		switch p.State {
		case store.TrialStarting:
			start = p.At
		case store.TrialMeasuring:
			measuring = p.At
		}
	}
	if start.IsZero() || measuring.IsZero() {
		return 0, false
	}
	return measuring.Sub(start), true
}

// configKey identifies a configuration.
func configKey(ps []store.Param) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s=%d;", p.Name, p.Value)
	}
	return b.String()
}

// candidates groups the confirmation and baseline trials by role and
// configuration, as the tuner's confirmation stage tallies them.
func candidates(trials []Trial, conf float64, v *Verdict) []Candidate {
	if conf <= 0 || conf >= 1 {
		conf = 0.9
	}
	var out []Candidate
	index := map[string]int{}
	for _, t := range trials {
		if t.Role != store.RoleConfirm && t.Role != store.RoleBaseline {
			continue
		}
		if !t.State.Terminal() || t.State == store.TrialInterrupted {
			continue
		}
		k := t.Role + "/" + configKey(t.Config)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, Candidate{Role: t.Role, Config: t.Config})
		}
		c := &out[i]
		c.Repeats++
		if t.State == store.TrialSucceeded && t.Feasible {
			c.Feasible++
		}
		if t.Objective != nil && t.State != store.TrialInvalid {
			c.Samples = append(c.Samples, *t.Objective)
		}
	}
	for i := range out {
		c := &out[i]
		if len(c.Samples) == 0 {
			continue
		}
		// The tuner's own estimate (geometric mean, log-scale interval),
		// so the page shows what the confirmation ranked by.
		e := estimate.Of(c.Samples, conf)
		c.Mean, c.Low, c.High, c.Bounded = e.Mean, e.Low, e.High, e.Bounded
		if v != nil && c.Role == store.RoleConfirm && configKey(c.Config) == configKey(v.Config) {
			c.Winner = true
		}
	}
	return out
}

// measured reports whether a trial has a point in the throughput-latency
// plane.
func (t *Trial) measured() bool {
	return (t.Class == ClassFeasible || t.Class == ClassInfeasible) && t.Latency > 0
}

// pareto returns the measured trials that no other measured trial beats
// on both throughput (higher) and latency (lower), ordered by latency.
func pareto(trials []Trial) []uint64 {
	var pts []*Trial
	for i := range trials {
		if trials[i].measured() {
			pts = append(pts, &trials[i])
		}
	}
	slices.SortStableFunc(pts, func(a, b *Trial) int {
		if a.Latency != b.Latency {
			return int(a.Latency - b.Latency)
		}
		switch {
		case a.Summary.Throughput > b.Summary.Throughput:
			return -1
		case a.Summary.Throughput < b.Summary.Throughput:
			return 1
		}
		return 0
	})
	var front []uint64
	best := math.Inf(-1)
	for _, p := range pts {
		if p.Summary.Throughput > best {
			front = append(front, p.Seq)
			best = p.Summary.Throughput
		}
	}
	return front
}

// winner is the best measured search trial of the recommended
// configuration.
func winner(trials []Trial, v *Verdict, maximize bool) uint64 {
	if v == nil {
		return 0
	}
	var seq uint64
	var best float64
	for _, t := range trials {
		if t.Objective == nil || !t.measured() || configKey(t.Config) != configKey(v.Config) {
			continue
		}
		if t.Role == store.RoleSearch && (seq == 0 || better(*t.Objective, best, maximize)) {
			seq, best = t.Seq, *t.Objective
		}
	}
	if seq == 0 { // recommended from a re-measurement only
		for _, t := range trials {
			if t.Objective != nil && t.measured() && configKey(t.Config) == configKey(v.Config) {
				return t.Seq
			}
		}
	}
	return seq
}

func better(a, b float64, maximize bool) bool {
	if maximize {
		return a > b
	}
	return a < b
}

func convergence(trials []Trial, maximize bool) ([]ConvergencePoint, uint64) {
	var out []ConvergencePoint
	var best *float64
	var confirmFrom uint64
	for _, t := range trials {
		if t.Role != store.RoleSearch && t.Role != "" && confirmFrom == 0 && (t.Role == store.RoleConfirm || t.Role == store.RoleBaseline) {
			confirmFrom = t.Seq
		}
		p := ConvergencePoint{Seq: t.Seq, Role: t.Role}
		if t.Objective != nil && t.measured() {
			v := *t.Objective
			p.Objective = &v
			if t.Class == ClassFeasible && (best == nil || better(v, *best, maximize)) {
				best = &v
			}
		}
		if best != nil {
			b := *best
			p.Best = &b
		}
		out = append(out, p)
	}
	return out, confirmFrom
}

func timing(run store.Run, trials []Trial, now time.Time) Timing {
	var tm Timing
	end := run.Ended
	if end.IsZero() {
		end = now
	}
	tm.Elapsed = end.Sub(run.Started)
	var setup, measure time.Duration
	for _, t := range trials {
		if t.Setup <= 0 || len(t.Phases) == 0 {
			continue
		}
		var from time.Time
		for _, p := range t.Phases {
			if p.State == store.TrialMeasuring {
				from = p.At
			}
		}
		last := t.Phases[len(t.Phases)-1].At
		if from.IsZero() || !last.After(from) {
			continue
		}
		setup += t.Setup
		measure += last.Sub(from)
		tm.Measured++
	}
	if tm.Measured > 0 {
		tm.MeanSetup = setup / time.Duration(tm.Measured)
		tm.MeanMeasure = measure / time.Duration(tm.Measured)
	}
	return tm
}

// history gathers a study's re-tune history; nil for a study whose only
// runs are one-shot tunes with at most one recommendation.
func history(ctx context.Context, db Store, study string, runs []store.Run, recs []store.Recommendation) (*History, error) {
	scheduled := slices.ContainsFunc(runs, func(r store.Run) bool { return r.Kind.Daemon() })
	if !scheduled && len(recs) < 2 {
		return nil, nil
	}
	h := &History{Runs: runs, Recommendations: recs}
	all, err := db.StudyTrials(ctx, study)
	if err != nil {
		return nil, err
	}
	for _, t := range all {
		if t.Role != store.RoleIncumbent || t.Objective == nil || t.State != store.TrialSucceeded || len(t.Phases) == 0 {
			continue
		}
		h.Remeasured = append(h.Remeasured, Remeasure{Run: t.Run, Seq: t.Seq, At: t.Phases[len(t.Phases)-1].At, Objective: *t.Objective, Feasible: t.Feasible})
	}
	return h, nil
}
