package probe

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/batchtune/batchtune/configs"
)

// Phase names what a run is doing, for progress displays.
type Phase string

// Phases.
const (
	PhaseWarming   Phase = "warming"
	PhaseMeasuring Phase = "measuring"
	PhaseDraining  Phase = "draining"
)

// Progress is a progress report. The hook is called on the goroutine that
// called Warmup or Measure, once a second and at phase changes; it must
// return quickly.
type Progress struct {
	Phase    Phase         `json:"phase"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	OK       int64         `json:"ok"`
	Errors   int64         `json:"errors"`
	QPS      float64       `json:"qps"` // successful responses in the last whole second
	P99      time.Duration `json:"p99_ns"`
	InFlight int           `json:"in_flight"`
}

// MeasureOptions configures Measure. Zero fields take the defaults named.
//
// The stopping rule. The run is cut into windows of at least Window that
// hold at least 100 successful requests each (so that a window's P99 is
// not just its maximum). After at least MinDuration, at each window close,
// the run stops as stable when all of these hold over the n >= MinWindows
// windows so far:
//
//  1. throughput: the 95% Student-t confidence interval of the mean window
//     throughput is within ±ThroughputTolerance of that mean;
//  2. P99 drift: the 95% Student-t interval of the mean of the windows'
//     P99s is within ±P99Tolerance of that mean (batch means: it catches
//     trends and correlated stretches that pooled counts would hide);
//  3. P99 precision: the distribution-free 95% interval of the pooled P99,
//     between the order statistics at ranks n(0.99 ∓ 1.96·sqrt(0.0099/n)),
//     is within ±P99Tolerance of it.
//
// perf_analyzer accepts a run when 3 windows agree within 10%: its verdict
// ignores how many windows there are and how they vary, while a confidence
// interval narrows only with evidence, and the P99 conditions bound the
// figure a tuner compares. When MaxDuration comes first the run stops with
// StopMaxDuration; the Result's Stability says how close it came.
//
// Early stop on a certain SLO breach is checked every 50 ms tick; see SLO
// and StopSLOBreach/StopErrorBudget. With StopBelow set, a closed-loop run
// also stops at a window close once its throughput is certainly below
// StopBelow (StopDominated): after MinWindows windows but before
// MinDuration if need be, as a breach does.
type MeasureOptions struct {
	MinDuration time.Duration // default 5s
	MaxDuration time.Duration // default 60s
	Window      time.Duration // default 1s; whole seconds
	// MinWindows is the fewest windows a stable run has; default 3, the
	// fewest for which a Student-t interval is worth computing (with 2
	// degrees of freedom it is wide: only steady windows pass). It is a
	// floor under MinDuration, which is what studies set: with 1 s
	// windows, min_duration 10s means at least 10 windows.
	MinWindows int

	ThroughputTolerance float64 // default 0.03 (±3%)
	P99Tolerance        float64 // default 0.10 (±10%)

	// SLO enables the early stop on a certain breach; nil disables it.
	SLO *SLO

	// StopBelow, when above 0, is the throughput (req/s) a closed-loop run
	// must exceed to matter: it stops as StopDominated once the one-sided
	// 99.9% Student-t bound of its windows' mean throughput is under it.
	// A tuner sets its best trial so far. 0 disables it.
	StopBelow float64

	// DrainTimeout is how long requests in flight at the stop may finish;
	// those still running then are cancelled and counted as unfinished,
	// with their time so far recorded as a lower bound. Default 2s.
	DrainTimeout time.Duration

	// The invalid-measurement guard. MaxPacingLag bounds the open-loop P99
	// of (actual send - intended send) while workers were available; the
	// lag is part of every corrected latency, so the default is a tenth of
	// the SLO's latency target, and 10ms at least (10ms with no SLO).
	// MaxCPU bounds the generator process's CPU time over the run as a
	// share of GOMAXPROCS cores (default 0.9).
	MaxPacingLag time.Duration
	MaxCPU       float64

	// Progress, when set, receives progress reports.
	Progress func(Progress)
}

func (o *MeasureOptions) withDefaults() MeasureOptions {
	var m MeasureOptions
	if o != nil {
		m = *o
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&m.MinDuration, 5*time.Second)
	def(&m.MaxDuration, 60*time.Second)
	def(&m.Window, time.Second)
	def(&m.DrainTimeout, 2*time.Second)
	lag := 10 * time.Millisecond
	if m.SLO != nil {
		lag = max(lag, m.SLO.Latency/10)
	}
	def(&m.MaxPacingLag, lag)
	if m.MinWindows == 0 {
		m.MinWindows = 3
	}
	if m.ThroughputTolerance == 0 {
		m.ThroughputTolerance = 0.03
	}
	if m.P99Tolerance == 0 {
		m.P99Tolerance = 0.10
	}
	if m.MaxCPU == 0 {
		m.MaxCPU = 0.9
	}
	return m
}

func (m MeasureOptions) problems(ps *configs.Problems) {
	if m.MinDuration < 0 {
		ps.Add("min_duration", "must be >= 0, got %s", m.MinDuration)
	}
	if m.MaxDuration < time.Second {
		ps.Add("max_duration", "must be >= 1s, got %s", m.MaxDuration)
	}
	if m.MinDuration > m.MaxDuration {
		ps.Add("min_duration", "%s is over max_duration %s", m.MinDuration, m.MaxDuration)
	}
	if m.Window < time.Second || m.Window%time.Second != 0 {
		ps.Add("window", "must be a whole number of seconds, got %s", m.Window)
	}
	if m.MinWindows < 2 {
		ps.Add("min_windows", "must be >= 2, got %d", m.MinWindows)
	}
	if !(m.ThroughputTolerance > 0 && m.ThroughputTolerance < 1) {
		ps.Add("throughput_tolerance", "must be in (0, 1), got %g", m.ThroughputTolerance)
	}
	if !(m.P99Tolerance > 0 && m.P99Tolerance < 1) {
		ps.Add("p99_tolerance", "must be in (0, 1), got %g", m.P99Tolerance)
	}
	if m.SLO != nil {
		if m.SLO.Latency < 0 {
			ps.Add("slo.latency", "must be >= 0, got %s", m.SLO.Latency)
		}
		if q := m.SLO.Quantile; q != 0 && !(q > 0.5 && q < 1) {
			ps.Add("slo.quantile", "must be in (0.5, 1), got %g", q)
		}
		if m.SLO.ErrorRate < 0 || math.IsNaN(m.SLO.ErrorRate) {
			ps.Add("slo.error_rate", "must be a fraction >= 0, got %g", m.SLO.ErrorRate)
		}
	}
	if m.StopBelow < 0 || math.IsNaN(m.StopBelow) || math.IsInf(m.StopBelow, 0) {
		ps.Add("stop_below", "must be a throughput >= 0 (0 disables it), got %g", m.StopBelow)
	}
	if m.DrainTimeout < 0 {
		ps.Add("drain_timeout", "must be >= 0, got %s", m.DrainTimeout)
	}
	if m.MaxPacingLag < 0 {
		ps.Add("max_pacing_lag", "must be >= 0, got %s", m.MaxPacingLag)
	}
	if !(m.MaxCPU > 0 && m.MaxCPU <= 1) {
		ps.Add("max_cpu", "must be in (0, 1], got %g", m.MaxCPU)
	}
}

// Measure runs the load until the stopping rule, an SLO breach, MaxDuration
// or ctx says stop, and returns the Result. Warmup should come first: every
// request of this call counts. Bad options return an error wrapping
// ErrBadOptions and naming each bad field. When ctx ends, Measure returns
// promptly with the partial Result (invalid, StopCancelled) and an error
// wrapping context.Cause(ctx).
func (c *Client) Measure(ctx context.Context, load Load, o *MeasureOptions) (*Result, error) {
	m := o.withDefaults()
	var ps configs.Problems
	load.problems(&ps)
	m.problems(&ps)
	if m.StopBelow > 0 && load.Open() {
		ps.Add("stop_below", "applies to a closed-loop load: an open loop's throughput is its offered rate")
	}
	if err := ps.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	c.log.Debug("probe: measure start", "model", c.t.Model, "load", load.String())
	r := &Result{Load: load, Transport: c.o.Transport, Connections: c.o.Connections, SLO: m.SLO}
	if load.Open() {
		r.OfferedRate = load.Rate
	}
	before, scrapeErr := c.scrape(ctx)

	var upper int64
	if load.Open() {
		upper = upperHits(load.pacer(), m.MaxDuration)
	}
	var sloNS int64
	if m.SLO != nil {
		sloNS = int64(m.SLO.Latency)
	}
	rule := stabilityRule{minWindows: m.MinWindows, tolT: m.ThroughputTolerance, tolP: m.P99Tolerance}
	var last Stability
	spec := runSpec{
		load: load, phase: PhaseMeasuring, bucket: time.Second, windowLen: m.Window, sloNS: sloNS,
		drain: m.DrainTimeout, progress: m.Progress,
		decide: func(now int64, a *aggregator, slowInFlight int, closed bool) (StopReason, string) {
			judged := a.byCode[codes.OK] + a.unfinished + int64(slowInFlight)
			if why, detail := breachCheck(m.SLO, judged, a.slow+int64(slowInFlight), a.completed(), a.failed(), upper); why != "" {
				return why, detail
			}
			if closed {
				last = rule.evaluate(a.windows, a.latency)
				if last.Stable && now >= int64(m.MinDuration) {
					return StopStable, fmt.Sprintf("throughput %.1f ± %.1f req/s, P99 %s (95%% interval %s..%s) over %d windows",
						last.ThroughputMean, last.ThroughputHalfWidth, usToDur(a.latency.ValueAtQuantile(99)), last.P99Low, last.P99High, last.Windows)
				}
				if why, detail := dominatedCheck(m.StopBelow, m.MinWindows, a.windows); why != "" {
					return why, detail
				}
			}
			if now >= int64(m.MaxDuration) {
				return StopMaxDuration, "not stable by max duration: " + firstNonEmpty(last.Unmet, "no window closed")
			}
			return "", ""
		},
	}
	cpu0, cpuOK := ProcessCPU()
	out := c.run(ctx, spec)
	cpu1, _ := ProcessCPU()
	a := out.a
	if out.reason != StopStable {
		last = rule.evaluate(a.windows, a.latency)
	}

	r.fillCounts(load, out)
	r.Stability = last
	r.fillGenerator(load, out, cpu1-cpu0, cpuOK)
	r.judgeValidity(load, out, m, cpuOK)

	after, scrapeErr2 := c.scrape(ctx)
	switch {
	case scrapeErr != nil:
		r.Server.Error = scrapeErr.Error()
	case scrapeErr2 != nil:
		r.Server.Error = scrapeErr2.Error()
	case before != nil && after != nil:
		r.Server = DeltaMetrics(before, after, c.t.Model)
	default:
		r.Server.Error = "not scraped: no metrics URL (give the REST address or a metrics URL)"
	}
	c.log.Debug("probe: measure end", "model", c.t.Model, "stop", r.StopReason, "qps", r.QPS, "p99", r.Latency.P99, "valid", r.Valid)
	if out.cause != nil {
		return r, fmt.Errorf("probe: measurement cancelled: %w", out.cause)
	}
	return r, nil
}

// fillCounts sets r's counts, rates, percentiles and series from a run's
// aggregate.
func (r *Result) fillCounts(load Load, out runOut) {
	a := out.a
	r.StopReason, r.StopDetail = out.reason, out.detail
	r.Duration = time.Duration(out.stopAt)
	r.OK = a.byCode[codes.OK]
	r.Requests = a.completed()
	r.Unfinished = a.unfinished
	for code, n := range a.byCode {
		if code != int(codes.OK) && n > 0 {
			if r.Errors == nil {
				r.Errors = map[string]int64{}
			}
			r.Errors[codes.Code(code).String()] = n
		}
	}
	if r.Requests > 0 {
		r.ErrorRate = float64(a.failed()) / float64(r.Requests)
	}
	if secs := r.Duration.Seconds(); secs > 0 {
		r.QPS = float64(a.okInRun) / secs
		if load.Open() {
			r.SentRate = float64(out.e.dispatched.Load()) / secs
		}
	}
	r.Latency = PercentilesOf(a.latency)
	r.ServiceTime = PercentilesOf(a.service)
	r.Series = a.series
}

// fillGenerator sets what the generator itself did: its cores, workers,
// CPU time (cpu, when cpuOK) and, open loop, its pacing lag. It needs
// fillCounts' Duration and Requests.
func (r *Result) fillGenerator(load Load, out runOut, cpu time.Duration, cpuOK bool) {
	a := out.a
	g := &r.Generator
	g.Cores = runtime.GOMAXPROCS(0)
	g.PeakWorkers = out.peakWorker
	if cpuOK {
		g.CPU = cpu
		if r.Duration > 0 {
			g.CPUUtil = g.CPU.Seconds() / (r.Duration.Seconds() * float64(g.Cores))
		}
		if r.Requests > 0 {
			g.CPUPerRequest = g.CPU / time.Duration(r.Requests)
		}
	}
	if load.Open() {
		g.WorkerBound = load.MaxWorkers
		if g.WorkerBound == 0 {
			g.WorkerBound = DefaultMaxWorkers
		}
		g.BoundWaits = out.e.boundHits.Load()
		if a.lag.TotalCount() > 0 {
			g.LagP50 = usToDur(a.lag.ValueAtQuantile(50))
			g.LagP99 = usToDur(a.lag.ValueAtQuantile(99))
			g.LagMax = usToDur(a.lag.Max())
		}
	}
}

// judgeValidity sets Valid, InvalidReason, RateKept and RateNote: only the
// generator's own failings invalidate a run. It needs fillCounts' and
// fillGenerator's figures.
func (r *Result) judgeValidity(load Load, out runOut, m MeasureOptions, cpuOK bool) {
	g := &r.Generator
	r.Valid = true
	r.RateKept = true
	var invalid []string
	if out.reason == StopCancelled {
		invalid = append(invalid, "cancelled: "+out.detail)
	}
	if !cpuOK {
		g.Note = "process CPU time is not available on this platform; the CPU guard was skipped"
	} else if g.CPUUtil > m.MaxCPU {
		invalid = append(invalid, fmt.Sprintf("generator CPU saturated: %.2f of %d cores (%.0f%% > %.0f%%)",
			g.CPU.Seconds()/r.Duration.Seconds(), g.Cores, 100*g.CPUUtil, 100*m.MaxCPU))
	}
	if load.Open() {
		if g.BoundWaits > 0 {
			r.RateKept = false
			r.RateNote = fmt.Sprintf("%d requests waited for a worker: all %d were busy (the server fell behind the offered rate; their wait counts in the latency)",
				g.BoundWaits, g.WorkerBound)
		} else {
			if g.LagP99 > m.MaxPacingLag {
				invalid = append(invalid, fmt.Sprintf("pacing lag P99 %s > %s with workers free: the generator could not send on time", g.LagP99, m.MaxPacingLag))
			}
			// The schedule says how many requests were due by the stop;
			// falling behind it by more than 1% (or 2 requests, for short
			// runs) with workers free is the generator's failure.
			due := upperHits(load.pacer(), r.Duration)
			if sent := out.e.dispatched.Load(); due-sent > max(2, due/100) && out.reason != StopCancelled {
				r.RateKept = false
				invalid = append(invalid, fmt.Sprintf("offered rate not kept: sent %d of the %d requests due (%.1f of %g req/s) with workers free",
					sent, due, r.SentRate, load.Rate))
			}
		}
	}
	if len(invalid) > 0 {
		r.Valid = false
		r.InvalidReason = strings.Join(invalid, "; ")
	}
}

func (c *Client) scrape(ctx context.Context) (*MetricsSnapshot, error) {
	if c.metricsURL == "" {
		return nil, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return Scrape(sctx, c.http, c.metricsURL)
}
