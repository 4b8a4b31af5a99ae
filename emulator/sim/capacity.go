package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/objective"
)

// CapacityTrial is one configuration's capacity measurement in virtual
// time: a short closed-loop burst suggests the first rate (as the tuner's
// does, capacity.StartFromBurst), then capacity.Search measures open-loop
// steps, each a Run of Trial at the step's rate, until the highest rate
// within the SLO is bracketed to the resolution.
type CapacityTrial struct {
	// Trial is the configuration, calibration and timing of every step;
	// its Load is replaced by each step's open-loop rate (Poisson and
	// MaxWorkers are kept). Trial.Seed seeds every step: a step's seed is
	// drawn from it and the step's rate, so the same rate measures the
	// same whichever search or sweep asks for it.
	Trial Trial
	// BurstConcurrency is the closed-loop concurrency of the burst that
	// suggests the first rate (load.concurrency of a study), and
	// BurstDuration its measured length (Trial.Duration when 0).
	BurstConcurrency int
	BurstDuration    time.Duration
	// SLO is the latency the SLO's Quantile (0.99 when 0) must meet, and
	// ErrorBudget the largest error rate a step may have.
	SLO         time.Duration
	Quantile    float64
	ErrorBudget float64
	// RateShortfall: a step keeps its rate when its successful answers
	// reach (1 - RateShortfall) of the offered rate, less two requests
	// over the step (objective.RateShortfall when 0).
	RateShortfall float64
	// Search bounds the step search; Start is set from the burst when 0,
	// SLO from the field above when 0.
	Search capacity.Options
}

// CapacityResult is a capacity measurement: the search's result (every
// step kept) and the burst that started it. LoadFailed, OOM and Reason
// are set, and the search empty, when the configuration does not load.
type CapacityResult struct {
	capacity.Result
	LoadFailed bool   `json:"load_failed,omitempty"`
	OOM        bool   `json:"oom,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Burst is the closed-loop burst's result; Start the first rate tried.
	Burst *Result `json:"burst,omitempty"`
	Start float64 `json:"start"`
}

func (c CapacityTrial) check() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrTrial, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.SLO <= 0:
		return bad("slo", "must be > 0, got %s", c.SLO)
	case !(c.ErrorBudget >= 0 && c.ErrorBudget < 1):
		return bad("error_budget", "must be in [0, 1), got %v", c.ErrorBudget)
	case !(c.RateShortfall >= 0 && c.RateShortfall < 1):
		return bad("rate_shortfall", "must be in [0, 1), got %v", c.RateShortfall)
	case c.Search.Start == 0 && c.BurstConcurrency < 1:
		return bad("burst_concurrency", "must be >= 1 when no start rate is given, got %d", c.BurstConcurrency)
	}
	if _, ok := quantileOf(Result{}, c.Quantile); !ok {
		return bad("quantile", "must be 0.5, 0.9, 0.95, 0.99 or 0.999, got %v", c.Quantile)
	}
	return nil
}

func quantileOf(r Result, q float64) (time.Duration, bool) {
	switch q {
	case 0.5:
		return r.Latency.P50, true
	case 0.9:
		return r.Latency.P90, true
	case 0.95:
		return r.Latency.P95, true
	case 0, 0.99:
		return r.Latency.P99, true
	case 0.999:
		return r.Latency.P999, true
	}
	return 0, false
}

// MeasureCapacity finds c's capacity. It is deterministic in c (the seed
// included). A configuration that does not load comes back with
// LoadFailed set, not as an error.
func MeasureCapacity(ctx context.Context, c CapacityTrial) (*CapacityResult, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	out := &CapacityResult{}
	o := c.Search
	if o.SLO == 0 {
		o.SLO = c.SLO
	}
	if o.Start == 0 {
		b := c.Trial
		b.Load = Load{Concurrency: c.BurstConcurrency}
		if c.BurstDuration > 0 {
			b.Duration = c.BurstDuration
		}
		b.Seed = stepSeed(c.Trial.Seed, "burst")
		r, err := Run(ctx, b)
		if err != nil {
			return nil, err
		}
		if r.LoadFailed {
			out.LoadFailed, out.OOM, out.Reason = true, r.OOM, r.Reason
			return out, nil
		}
		out.Burst = r
		lat, _ := quantileOf(*r, c.Quantile)
		o.Start = capacity.StartFromBurst(r.QPS, lat, c.SLO)
		if !(o.Start > 0) {
			// Nothing came back from the burst: start low, the search
			// moves up quickly from there.
			o.Start = float64(c.BurstConcurrency)
		}
	}
	out.Start = o.Start
	var failed *Result
	res, err := capacity.Search(ctx, func(ctx context.Context, rate float64) (capacity.Step, error) {
		s, r, err := c.Step(ctx, rate)
		if r != nil && r.LoadFailed {
			failed = r
			return s, fmt.Errorf("%w: the configuration did not load: %s", ErrTrial, r.Reason)
		}
		return s, err
	}, o)
	if failed != nil {
		out.LoadFailed, out.OOM, out.Reason = true, failed.OOM, failed.Reason
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	out.Result = res
	return out, nil
}

// stepSeed draws a step's seed from the trial's seed and a label (the
// rate, or "burst").
func stepSeed(seed uint64, label string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatUint(seed, 10) + "|" + label))
	return h.Sum64()
}

// Step measures c's configuration open loop at rate requests per second
// and judges the step as the tuner does: the SLO quantile within the SLO,
// the error rate within the budget, and the rate kept. Its seed depends on
// c.Trial.Seed and the rate only. The Result is returned beside the step
// (nil on error); a configuration that does not load gives a step that
// does not meet, with the Result's LoadFailed set.
func (c CapacityTrial) Step(ctx context.Context, rate float64) (capacity.Step, *Result, error) {
	t := c.Trial
	t.Load = Load{Rate: rate, Poisson: c.Trial.Load.Poisson, MaxWorkers: c.Trial.Load.MaxWorkers}
	t.Seed = stepSeed(c.Trial.Seed, strconv.FormatUint(math.Float64bits(rate), 16))
	r, err := Run(ctx, t)
	if err != nil {
		return capacity.Step{}, nil, err
	}
	s := capacity.Step{Offered: rate}
	if r.LoadFailed {
		s.Reason = "did not load: " + r.Reason
		return s, r, nil
	}
	q, _ := quantileOf(*r, c.Quantile)
	s.Achieved, s.ErrorRate, s.Quantile = r.QPS, r.ErrorRate, q
	s.P50, s.P90, s.P99 = r.Latency.P50, r.Latency.P90, r.Latency.P99
	s.MeanBatch = r.MeanBatch
	if r.Latency.Mean > 0 {
		s.QueueShare = min(1, float64(r.MeanQueue)/float64(r.Latency.Mean))
	}
	s.Duration = r.Duration
	short := c.RateShortfall
	if short == 0 {
		short = objective.RateShortfall
	}
	// Two requests of slack: at a low rate, whether the window's edges
	// cut one request in or out is more than the shortfall allows.
	if secs := r.Duration.Seconds(); secs > 0 && rate > 0 {
		short += 2 / (secs * rate)
	}
	// The tuner's rule (objective.Constraints), as the tuner judges a step.
	con := objective.Constraints{SLO: c.SLO, ErrorBudget: c.ErrorBudget}
	kept := &objective.Rate{Sent: rate, Achieved: r.QPS, Shortfall: short}
	var why []string
	for _, b := range con.Breaches(q, r.ErrorRate, kept) {
		why = append(why, con.Describe(b, "p"+quantileName(c.Quantile), q, r.ErrorRate, kept))
	}
	s.Meets = len(why) == 0 && r.OK > 0
	if !s.Meets {
		if len(why) == 0 {
			why = append(why, "no request succeeded")
		}
		s.Reason = why[0]
		for _, w := range why[1:] {
			s.Reason += "; " + w
		}
	}
	return s, r, nil
}

func quantileName(q float64) string {
	if q == 0 {
		q = 0.99
	}
	return strconv.FormatFloat(q*100, 'g', -1, 64)
}

// SweepCapacity measures n steps at rates spaced geometrically from lo to
// hi (the check of a search against brute force). Its Capacity is the
// highest rate that met the SLO (0 when none did), Upper the next rate
// swept, which broke it (0 when Capacity is hi). A step's verdict need not
// be monotone in the rate (a long batch timeout waits longest at low
// rates; noise near the SLO): count the steps that met above the first
// that broke to see how far it is not. Resolved is set when some rate met
// and a higher one broke.
func SweepCapacity(ctx context.Context, c CapacityTrial, lo, hi float64, n int) (capacity.Result, error) {
	if c.BurstConcurrency < 1 {
		c.BurstConcurrency = 1 // a sweep runs no burst
	}
	if err := c.check(); err != nil {
		return capacity.Result{}, err
	}
	if !(lo > 0 && hi > lo) || n < 2 {
		return capacity.Result{}, fmt.Errorf("%w: a sweep needs 0 < lo < hi and n >= 2, got %g, %g, %d", ErrTrial, lo, hi, n)
	}
	var r capacity.Result
	for i := range n {
		rate := lo * math.Pow(hi/lo, float64(i)/float64(n-1))
		s, res, err := c.Step(ctx, rate)
		if err != nil {
			return r, err
		}
		if res.LoadFailed {
			return r, fmt.Errorf("%w: the configuration did not load: %s", ErrTrial, res.Reason)
		}
		r.Steps = append(r.Steps, s)
		if s.Meets {
			r.Capacity, r.Upper = rate, 0
		} else if r.Capacity > 0 && r.Upper == 0 {
			r.Upper = rate
		}
	}
	r.Resolved = r.Capacity > 0 && r.Upper > 0
	return r, nil
}

// BracketsAgree reports whether two capacity brackets [Capacity, Upper)
// (a search's and a sweep's) say the same within the resolution: each
// lower end is at most (1 + resolution) times the other's upper end. An
// open upper end (0) agrees with any lower end above it.
func BracketsAgree(a, b capacity.Result, resolution float64) bool {
	under := func(lo, hi float64) bool { return hi == 0 || lo <= hi*(1+resolution) }
	return a.Capacity > 0 && b.Capacity > 0 && under(a.Capacity, b.Upper) && under(b.Capacity, a.Upper)
}
