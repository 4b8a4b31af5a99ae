package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Step is one measured load step at a fixed open-loop rate.
type Step struct {
	// Offered is the rate requests were scheduled at, Achieved the rate of
	// successful responses, both in requests per second.
	Offered  float64 `json:"offered"`
	Achieved float64 `json:"achieved"`
	// Latency quantiles, corrected for coordinated omission. Quantile is
	// the SLO's quantile (P99 for slo.quantile 0.99).
	P50      time.Duration `json:"p50_ns"`
	P90      time.Duration `json:"p90_ns"`
	P99      time.Duration `json:"p99_ns"`
	Quantile time.Duration `json:"quantile_ns"`
	// ErrorRate is failed / completed requests.
	ErrorRate float64 `json:"error_rate"`
	// MeanBatch and QueueShare come from the server's metrics when it
	// exports them (0 when not): the mean batch size run, and the share of
	// a request's latency spent waiting in the batching queue.
	MeanBatch  float64 `json:"mean_batch,omitempty"`
	QueueShare float64 `json:"queue_share,omitempty"`
	// Duration is how long the step measured; EarlyStop is true when it
	// ended early on a certain SLO breach.
	Duration  time.Duration `json:"duration_ns"`
	EarlyStop bool          `json:"early_stop,omitempty"`
	// Meets is the step's verdict under the SLO; Reason says why not.
	Meets  bool   `json:"meets"`
	Reason string `json:"reason,omitempty"`
}

// MeasureFunc measures one step at rate requests per second. An error
// ends the search (the server died, the context ended), except one
// wrapping ErrNotOffered; a step that breaks the SLO is a Step with Meets
// false, not an error.
type MeasureFunc func(ctx context.Context, rate float64) (Step, error)

// ErrNotOffered says the load generator could not offer a step's rate: the
// step is no verdict on the server. Once some rate has met the SLO, Search
// takes the rate as the generator's ceiling and goes on below it; before
// that, it ends the search.
var ErrNotOffered = errors.New("the load generator could not offer the rate")

// Options bound a Search. The zero value of a field means its default.
type Options struct {
	// Start is the first rate tried, typically from a short closed-loop
	// burst (see StartFromBurst). Required.
	Start float64
	// Resolution: the search ends when the bracket's upper end is within
	// this fraction above its lower end. Default 0.05.
	Resolution float64
	// Min and Max bound the rates tried. Default Min 0.5 req/s; Max 0 is
	// unbounded. When Max meets the SLO, Capacity is Max and Bounded is
	// true: the server sustains at least that.
	Min, Max float64
	// MaxSteps bounds the steps measured. Default 10.
	MaxSteps int
	// SLO, when set, sizes the strides up: a step whose SLO-quantile
	// latency is under half of it is far from the knee (the next rate
	// doubles); nearer, the next is 1.25x. Zero: always 1.5x.
	SLO time.Duration
}

func (o Options) withDefaults() Options {
	if o.Resolution == 0 {
		o.Resolution = 0.05
	}
	if o.Min == 0 {
		o.Min = 0.5
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 10
	}
	return o
}

// ErrBadOptions wraps every complaint about Options.
var ErrBadOptions = errors.New("capacity: bad options")

func (o Options) check() error {
	switch {
	case !(o.Start > 0) || math.IsInf(o.Start, 0):
		return fmt.Errorf("%w: start rate must be > 0 req/s, got %g", ErrBadOptions, o.Start)
	case !(o.Resolution > 0 && o.Resolution < 1):
		return fmt.Errorf("%w: resolution must be in (0, 1), got %g", ErrBadOptions, o.Resolution)
	case !(o.Min > 0):
		return fmt.Errorf("%w: min rate must be > 0, got %g", ErrBadOptions, o.Min)
	case o.Max != 0 && !(o.Max >= o.Min):
		return fmt.Errorf("%w: max rate %g is under min rate %g", ErrBadOptions, o.Max, o.Min)
	case o.MaxSteps < 2:
		return fmt.Errorf("%w: max steps must be >= 2, got %d", ErrBadOptions, o.MaxSteps)
	}
	return nil
}

// Result is a search's outcome.
type Result struct {
	// Capacity is the highest rate measured that met the SLO (0 when none
	// did, down to Min). Upper is the lowest rate measured that broke it
	// (0 when none did). The true capacity lies in [Capacity, Upper).
	Capacity float64 `json:"capacity"`
	Upper    float64 `json:"upper,omitempty"`
	// Resolved is true when Upper is within the resolution of Capacity.
	// Bounded is true when the search stopped at Options.Max with the SLO
	// still met, so Capacity is a lower bound.
	Resolved bool `json:"resolved"`
	Bounded  bool `json:"bounded,omitempty"`
	// ClientBound is true when the search ended under a rate the load
	// generator could not offer (ErrNotOffered) with every rate it could
	// offer meeting the SLO: Capacity, within the resolution of that
	// ceiling, is then a lower bound set by the client, not the server.
	ClientBound bool `json:"client_bound,omitempty"`
	// Ceiling is the lowest rate the load generator could not offer after
	// some rate met (0 when it offered every rate tried): no step was
	// measured at or above it.
	Ceiling float64 `json:"ceiling,omitempty"`
	// Steps in the order measured.
	Steps []Step `json:"steps"`
	// Note says why the search ended short of the resolution, if it did.
	Note string `json:"note,omitempty"`
}

// Floor reports whether Capacity is only a lower bound of what the server
// sustains: the search met the SLO at the highest rate allowed, or the
// load generator could not offer a higher one.
func (r Result) Floor() bool { return r.Capacity > 0 && (r.Bounded || r.ClientBound) }

// Knee returns the measured step with the highest achieved rate that
// still met the SLO, and false when none did.
func (r Result) Knee() (Step, bool) {
	var best Step
	found := false
	for _, s := range r.Steps {
		if s.Meets && (!found || s.Offered > best.Offered) {
			best, found = s, true
		}
	}
	return best, found
}

// Search finds the highest rate at which measure's steps meet the SLO, to
// the resolution, in few steps: from Start it moves up (while steps meet)
// or down (while they break) by a factor that shrinks as the bracket
// closes, then bisects the bracket geometrically. A rate the generator
// could not offer, above one that met, bisects towards the met one the
// same way, and no later step goes that high. A step that broke
// because the server could not keep up says where the server saturates
// (its achieved rate): the next step down goes no higher than just under
// it. Measuring errors end the search and return what was measured.
func Search(ctx context.Context, measure MeasureFunc, o Options) (Result, error) {
	o = o.withDefaults()
	if err := o.check(); err != nil {
		return Result{}, err
	}
	var r Result
	lo, hi := 0.0, 0.0 // highest rate that met; lowest that broke (0: none yet)
	ceil := 0.0        // lowest rate the generator could not offer (0: none)
	var ceilNote string
	rate := clamp(o.Start, o)
	for len(r.Steps) < o.MaxSteps {
		s, err := measure(ctx, rate)
		if errors.Is(err, ErrNotOffered) && lo > 0 && ctx.Err() == nil {
			// The generator's limit, not the server's: try under it. A
			// ceiling within the resolution of a met rate ends the search
			// with a capacity the client, not the server, set.
			ceil = rate
			ceilNote = fmt.Sprintf("step %d at %.4g req/s: %v", len(r.Steps)+1, rate, err)
			if ceil <= lo*(1+o.Resolution) {
				r.ClientBound, r.Note = true, ceilNote
				break
			}
			rate = math.Sqrt(lo * ceil)
			continue
		}
		if err != nil {
			r.Capacity, r.Upper = lo, hi
			r.Note = fmt.Sprintf("step %d at %.4g req/s: %v", len(r.Steps)+1, rate, err)
			return r, err
		}
		s.Offered = rate
		r.Steps = append(r.Steps, s)
		if s.Meets {
			lo = max(lo, rate)
		} else if hi == 0 || rate < hi {
			hi = rate
		}
		if hi > 0 && lo > 0 && hi <= lo*(1+o.Resolution) {
			r.Resolved = true
			break
		}
		if ceil > 0 && ceil <= lo*(1+o.Resolution) {
			r.ClientBound, r.Note = true, ceilNote
			break
		}
		next, stop, note := nextRate(lo, hi, s, o)
		if stop {
			r.Note = note
			break
		}
		if ceil > 0 && next >= ceil {
			next = math.Sqrt(lo * ceil) // lo > 0: rates over it were offered only after one met
		}
		rate = next
	}
	r.Capacity, r.Upper, r.Ceiling = lo, hi, ceil
	if !r.Resolved && r.Note == "" {
		r.Note = fmt.Sprintf("stopped after %d steps (max_steps) with the bracket [%.4g, %.4g) req/s", len(r.Steps), lo, hi)
	}
	if o.Max > 0 && lo >= o.Max {
		r.Bounded = true
	}
	return r, nil
}

// nextRate picks the next step's rate from the bracket so far and the
// last step.
func nextRate(lo, hi float64, last Step, o Options) (rate float64, stop bool, note string) {
	switch {
	case hi == 0: // everything met so far: go up
		if o.Max > 0 && lo >= o.Max {
			return 0, true, fmt.Sprintf("met the SLO at the highest rate allowed (%.4g req/s)", o.Max)
		}
		// Far from the SLO, a bigger stride; near it, a smaller one.
		up := 1.5
		if o.SLO > 0 && last.Quantile > 0 {
			up = 1.25
			if last.Quantile < o.SLO/2 {
				up = 2
			}
		}
		return clamp(lo*up, o), false, ""
	case lo == 0: // everything broke so far: go down
		if hi <= o.Min {
			return 0, true, fmt.Sprintf("broke the SLO even at the lowest rate allowed (%.4g req/s)", o.Min)
		}
		down := hi * 0.5
		// A server that could not keep up saturates near its achieved
		// rate; just under it is the most useful next step.
		// An early-stopped step's achieved rate is that of its first
		// fraction of a second, no sign of saturation.
		if last.Achieved > 0 && last.Achieved < last.Offered && !last.EarlyStop {
			down = max(down, last.Achieved*0.9)
		}
		return clamp(min(down, hi*0.9), o), false, ""
	default:
		return math.Sqrt(lo * hi), false, ""
	}
}

func clamp(rate float64, o Options) float64 {
	rate = max(rate, o.Min)
	if o.Max > 0 {
		rate = min(rate, o.Max)
	}
	return rate
}

// StartFromBurst suggests the first rate of a search from a short
// closed-loop burst that achieved qps with the given SLO-quantile latency.
// By Little's law the burst held qps × latency requests in flight; an open
// loop at the same rate sees burstier arrivals than the closed loop's
// paced ones, so the start is a little under qps, and scaled down by
// slo/latency when the burst already broke the SLO.
func StartFromBurst(qps float64, latency, slo time.Duration) float64 {
	start := 0.9 * qps
	if latency > slo && slo > 0 {
		start *= float64(slo) / float64(latency)
	}
	return start
}
