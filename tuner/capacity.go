package tuner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// A trial under objective max_capacity does not measure one fixed load: after
// the warmup, a short closed-loop burst at load.concurrency says roughly what
// the server serves (capacity.StartFromBurst), then capacity.Search measures
// open-loop steps (latency from the intended send time, early stop on a
// certain SLO breach) until the highest rate within the SLO is bracketed to
// the resolution. The trial's objective value is that rate.

// CapacityProber is a Prober that can also search a freshly started
// server's capacity. The tuner uses it under objective max_capacity; a
// Prober that is not one cannot run such a study.
type CapacityProber interface {
	Capacity(ctx context.Context, ep runtime.Endpoints, phase func(store.TrialState)) (*CapacityMeasurement, error)
}

var _ CapacityProber = (*StudyProber)(nil)

// CapacityMeasurement is what a capacity trial measured.
type CapacityMeasurement struct {
	// Burst is the closed-loop measurement at load.concurrency that gave
	// the search its Start rate.
	Burst *probe.Result `json:"burst"`
	Start float64       `json:"start"`
	// Search is the step search: the bracket and every step.
	Search capacity.Result `json:"search"`
	// Knee is the full measurement of the highest step that met the SLO,
	// nil when none did; Lowest that of the lowest rate measured (the
	// evidence of an infeasible trial).
	Knee   *probe.Result `json:"knee,omitempty"`
	Lowest *probe.Result `json:"lowest,omitempty"`
	// Measuring is the time spent under load after the warmup: the burst
	// and every step (what a fixed-load trial spends in one measurement).
	Measuring time.Duration `json:"measuring_ns"`
	// GeneratorLimit says why the search stopped at a step the load
	// generator could not offer (its result was invalid, so it is no
	// verdict on the server); empty when it did not.
	GeneratorLimit string `json:"generator_limit,omitempty"`
}

// StepMeasurer measures one load; *probe.Client is one.
type StepMeasurer interface {
	Measure(ctx context.Context, load probe.Load, o *probe.MeasureOptions) (*probe.Result, error)
}

// errGeneratorLimited marks a step whose measurement was invalid: the
// search goes on under that rate once one has met the SLO, and ends
// before (capacity.ErrNotOffered).
var errGeneratorLimited = capacity.ErrNotOffered

// Capacity implements CapacityProber.
func (p *StudyProber) Capacity(ctx context.Context, ep runtime.Endpoints, phase func(store.TrialState)) (*CapacityMeasurement, error) {
	c, err := p.ready(ctx, ep, phase)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return MeasureCapacity(ctx, c, p.study)
}

// Step and burst lengths. A step only has to tell whether the SLO holds at
// its rate; near the knee latency turns up steeply, so a rate 5% over it
// breaks the SLO clearly within seconds, and a clear breach stops earlier
// still. The burst only has to say the rate to start from.
const (
	burstDuration   = 2 * time.Second
	stepMinDuration = 2 * time.Second
	stepMinWindows  = 2
)

// settleAfterBreach is the idle pause after a step that broke the SLO
// (measured on the stand-in: without it the next, lower step was stopped
// within 0.2 s on the backlog; experiments/capacity). A variable so that
// the fakes' tests need not wait.
var settleAfterBreach = time.Second

// stepDurations are a step's measuring bounds: a third of a fixed-load
// trial's, at least 2 s (two 1 s windows) and at most 10 s.
func stepDurations(s *configs.Study) (lo, hi time.Duration) {
	lo = max(stepMinDuration, min(s.Load.MinDuration.D()/3, 5*time.Second))
	hi = max(lo, min(s.Load.MaxDuration.D()/3, 10*time.Second))
	return lo, hi
}

// MeasureCapacity runs a capacity trial's measurement on a warm server: the
// burst, then the step search. It returns an error when nothing could be
// measured, and with what was measured when the search was cut short (the
// server died, ctx ended).
func MeasureCapacity(ctx context.Context, m StepMeasurer, s *configs.Study) (*CapacityMeasurement, error) {
	out := &CapacityMeasurement{}
	slo := studySLO(s)
	burst, err := m.Measure(ctx, probe.Load{Concurrency: max(s.Load.Concurrency, 1)}, &probe.MeasureOptions{
		MinDuration: burstDuration, MaxDuration: burstDuration, MinWindows: stepMinWindows,
	})
	if burst != nil {
		out.Burst = burst
		out.Measuring += burst.Duration
	}
	if err != nil {
		return out, fmt.Errorf("burst: %w", err)
	}
	lat, err := quantile(burst.Latency, s.SLO.Quantile)
	if err != nil {
		return out, err
	}
	if !(burst.QPS > 0) {
		return out, fmt.Errorf("burst: closed loop at concurrency %d served no request in %s (%s)",
			s.Load.Concurrency, burst.Duration.Round(time.Millisecond), topErrors(burst.Errors))
	}
	out.Start = capacity.StartFromBurst(burst.QPS, lat, slo.Latency)

	broke := false
	measure := func(ctx context.Context, rate float64) (capacity.Step, error) {
		if broke {
			// A step that broke the SLO leaves the server's queue full:
			// the next step starts once it has drained, or its first
			// requests would be judged on the last step's backlog.
			select {
			case <-ctx.Done():
				return capacity.Step{}, context.Cause(ctx)
			case <-time.After(settleAfterBreach):
			}
		}
		st, r, err := MeasureStep(ctx, m, s, rate)
		if errors.Is(err, errGeneratorLimited) && ctx.Err() == nil {
			// A moment of CPU contention can delay the generator's sends:
			// measure the rate once more before calling it the limit.
			if r != nil {
				out.Measuring += r.Duration
			}
			st, r, err = MeasureStep(ctx, m, s, rate)
		}
		broke = err == nil && !st.Meets
		if r != nil {
			out.Measuring += r.Duration
		}
		if err != nil {
			return st, err
		}
		if st.Meets && (out.Knee == nil || rate > out.Knee.OfferedRate) {
			out.Knee = r
		}
		if out.Lowest == nil || rate < out.Lowest.OfferedRate {
			out.Lowest = r
		}
		return st, nil
	}
	res, err := capacity.Search(ctx, measure, capacity.Options{Start: out.Start, SLO: slo.Latency})
	out.Search = res
	if errors.Is(err, errGeneratorLimited) || res.ClientBound {
		out.GeneratorLimit = res.Note
		return out, nil
	}
	return out, err
}

// MeasureStep measures one capacity step at rate req/s on a warm server,
// open loop with the study's arrival process and SLO (early stop on a
// certain breach), and returns its verdict with the probe's result. An
// invalid measurement returns an error wrapping errGeneratorLimited.
func MeasureStep(ctx context.Context, m StepMeasurer, s *configs.Study, rate float64) (capacity.Step, *probe.Result, error) {
	lo, hi := stepDurations(s)
	load := probe.Load{Rate: rate, Poisson: s.Load.Arrival == configs.ArrivalPoisson, Seed: uint64(s.Search.Seed)}
	r, err := m.Measure(ctx, load, &probe.MeasureOptions{MinDuration: lo, MaxDuration: hi, MinWindows: stepMinWindows, SLO: studySLO(s)})
	if err != nil {
		return capacity.Step{}, r, err
	}
	st, err := stepOf(r, s.SLO)
	return st, r, err
}

// stepOf is one step's verdict under the SLO: the SLO quantile within
// slo.latency, the error rate within slo.error_rate, and the offered rate
// kept (sent on schedule, and served: achieved at least the rate sent,
// less the responses a latency within the SLO leaves in flight at the
// stop and the 2% the pacing allows). An invalid measurement (the
// generator was the bottleneck) is no verdict: it returns an error
// wrapping errGeneratorLimited.
func stepOf(r *probe.Result, slo configs.SLO) (capacity.Step, error) {
	st := capacity.Step{
		Offered: r.OfferedRate, Achieved: r.QPS,
		P50: r.Latency.P50, P90: r.Latency.P90, P99: r.Latency.P99,
		ErrorRate: r.ErrorRate, MeanBatch: r.Server.MeanBatchSize, QueueShare: r.Server.QueuingShare,
		Duration:  r.Duration,
		EarlyStop: r.StopReason == probe.StopSLOBreach || r.StopReason == probe.StopErrorBudget,
	}
	if !r.Valid {
		return st, fmt.Errorf("%w: %s", errGeneratorLimited, r.InvalidReason)
	}
	lat, err := quantile(r.Latency, slo.Quantile)
	if err != nil {
		return st, err
	}
	st.Quantile = lat
	sent := r.SentRate
	if sent == 0 {
		sent = r.OfferedRate
	}
	tolerance := objective.RateShortfall
	if secs := r.Duration.Seconds(); secs > 0 {
		tolerance += slo.Latency.D().Seconds() / secs
	}
	var rate *objective.Rate
	var notKept []string
	switch {
	case st.EarlyStop:
		// Stopped within its first moments: its achieved rate counts the
		// requests still in flight as missing; the breach decides.
	case !r.RateKept:
		notKept = append(notKept, "offered rate not kept: "+r.RateNote)
	default:
		rate = &objective.Rate{Sent: sent, Achieved: r.QPS, Shortfall: tolerance}
	}
	c := objective.Constraints{SLO: slo.Latency.D(), ErrorBudget: slo.ErrorRate}
	problems := append(breachReasons(c, qname(slo.Quantile), lat, r, rate), notKept...)
	if st.EarlyStop && len(problems) == 0 {
		problems = append(problems, r.StopDetail)
	}
	st.Meets = len(problems) == 0
	st.Reason = joinReasons(problems)
	return st, nil
}

// scoreCapacity judges a capacity trial: its objective value is the
// capacity found, feasible when some rate met the SLO. Its summary is the
// knee's measurement (the highest rate that met the SLO), or the lowest
// rate's when none met. A search the generator cut short before any rate
// met is invalid.
func scoreCapacity(m *CapacityMeasurement) verdict {
	var v verdict
	res := m.Search
	switch {
	case m.Knee != nil:
		v.Summary = summarize(m.Knee)
	case m.Lowest != nil:
		v.Summary = summarize(m.Lowest)
	}
	if res.Capacity == 0 && m.GeneratorLimit != "" {
		v.State = store.TrialInvalid
		v.Reason = "measurement invalid: " + m.GeneratorLimit
		return v
	}
	c := res.Capacity
	v.Objective = &c
	v.State = store.TrialSucceeded
	v.Feasible = c > 0
	switch {
	case !v.Feasible:
		low, ok := lowestStep(res.Steps)
		v.Reason = "no rate met the SLO"
		if ok {
			v.Reason = fmt.Sprintf("no rate met the SLO: at %.4g req/s, the lowest tried, %s", low.Offered, low.Reason)
		}
		if res.Note != "" {
			v.Reason += " (" + res.Note + ")"
		}
	case m.GeneratorLimit != "":
		v.Reason = fmt.Sprintf("capacity at least %.1f req/s: %s", c, m.GeneratorLimit)
	case !res.Resolved && res.Note != "":
		v.Reason = fmt.Sprintf("capacity %.1f req/s, not resolved: %s", c, res.Note)
	}
	return v
}

func lowestStep(steps []capacity.Step) (capacity.Step, bool) {
	var low capacity.Step
	found := false
	for _, s := range steps {
		if !found || s.Offered < low.Offered {
			low, found = s, true
		}
	}
	return low, found
}

// Ready waits until a started server's model is AVAILABLE, connects and
// warms it up as a trial does, and returns the client (the caller closes
// it): the start of a measurement outside a trial, such as the sweep that
// checks the capacity search (experiments/capacity).
func (p *StudyProber) Ready(ctx context.Context, ep runtime.Endpoints) (*probe.Client, error) {
	return p.ready(ctx, ep, func(store.TrialState) {})
}
