package probe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/batchtune/batchtune/configs"
)

// StopSoakDone ends a soak: its duration passed.
const StopSoakDone StopReason = "duration"

// SoakOptions configures Soak. Zero fields take the defaults named.
type SoakOptions struct {
	// Duration is how long the rate is held; required.
	Duration time.Duration
	// Interval cuts the soak into contiguous intervals, whole seconds;
	// default 10s. The last one is shorter when Duration is not a
	// multiple of it.
	Interval time.Duration
	// Quantile is the latency quantile reported per interval as
	// Interval.Quantile; default 0.99.
	Quantile float64
	// DrainTimeout, MaxPacingLag and MaxCPU are as in MeasureOptions
	// (defaults 2s, 10ms, 0.9).
	DrainTimeout time.Duration
	MaxPacingLag time.Duration
	MaxCPU       float64
	// Progress, when set, receives progress reports.
	Progress func(Progress)
}

// Interval is one interval of a soak. Requests belong to the interval in
// which they completed (requests that completed while draining after the
// end belong to the last one); their latency counts from the intended send
// time, as every open-loop figure of the probe does.
type Interval struct {
	Index int           `json:"index"`
	Start time.Duration `json:"start_ns"`
	Dur   time.Duration `json:"duration_ns"`
	// Sent is the requests sent in the interval, OK and Errors those that
	// completed in it.
	Sent   int64 `json:"sent"`
	OK     int64 `json:"ok"`
	Errors int64 `json:"errors"`
	// Latency summarises the interval's successful requests; Quantile is
	// their latency at SoakOptions.Quantile.
	Latency  Percentiles   `json:"latency"`
	Quantile time.Duration `json:"quantile_ns"`
	// Server is the deltas of the server's metrics over the interval
	// (scrapes at its bounds, within a tick of them).
	Server ServerMetrics `json:"server"`
	// Note says when the interval's figures are blurred (a controller
	// stall finalised seconds of two intervals at once).
	Note string `json:"note,omitempty"`
}

// SoakResult is a soak: the whole run as Measure reports one (Result),
// and its contiguous intervals.
type SoakResult struct {
	Result    *Result    `json:"result"`
	Intervals []Interval `json:"intervals"`
}

func (o *SoakOptions) withDefaults() SoakOptions {
	var s SoakOptions
	if o != nil {
		s = *o
	}
	if s.Interval == 0 {
		s.Interval = 10 * time.Second
	}
	if s.Quantile == 0 {
		s.Quantile = 0.99
	}
	if s.DrainTimeout == 0 {
		s.DrainTimeout = 2 * time.Second
	}
	if s.MaxPacingLag == 0 {
		s.MaxPacingLag = 10 * time.Millisecond
	}
	if s.MaxCPU == 0 {
		s.MaxCPU = 0.9
	}
	return s
}

func (s SoakOptions) problems(ps *configs.Problems) {
	if s.Duration < time.Second {
		ps.Add("duration", "must be >= 1s, got %s", s.Duration)
	}
	if s.Interval < time.Second || s.Interval%time.Second != 0 {
		ps.Add("interval", "must be a whole number of seconds, got %s", s.Interval)
	} else if s.Duration > 0 && s.Interval > s.Duration {
		ps.Add("interval", "%s is longer than the duration %s", s.Interval, s.Duration)
	}
	if !(s.Quantile > 0.5 && s.Quantile < 1) {
		ps.Add("quantile", "must be in (0.5, 1), got %g", s.Quantile)
	}
	if s.DrainTimeout < 0 {
		ps.Add("drain_timeout", "must be >= 0, got %s", s.DrainTimeout)
	}
	if !(s.MaxCPU > 0 && s.MaxCPU <= 1) {
		ps.Add("max_cpu", "must be in (0, 1], got %g", s.MaxCPU)
	}
}

// Soak holds an open-loop load for o.Duration as one continuous run (no
// gap, no restart of the schedule between intervals) and reports it per
// interval: the acceptance soak of a configuration. It never stops early:
// a stall or a slow leak must show in the series. The server's metrics are
// scraped at every interval bound. The Result is judged for validity as
// Measure's is (the generator's own failings); judging the intervals
// against an SLO is the caller's. When ctx ends, Soak returns the partial
// result and an error wrapping context.Cause(ctx).
func (c *Client) Soak(ctx context.Context, load Load, o *SoakOptions) (*SoakResult, error) {
	so := o.withDefaults()
	var ps configs.Problems
	load.problems(&ps)
	if !load.Open() && load.Concurrency > 0 {
		ps.Add("load.rate", "a soak holds a rate: give an open-loop load")
	}
	so.problems(&ps)
	if err := ps.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	n := int((so.Duration + so.Interval - 1) / so.Interval)
	hists := make([]*hdrhistogram.Histogram, n)
	notes := make([]string, n)
	for i := range hists {
		hists[i] = newHist()
	}
	intervalOf := func(bucket int) int {
		return min(n-1, int(time.Duration(bucket)*time.Second/so.Interval))
	}
	// take moves the latencies of the seconds finalised since the last
	// call out of the aggregator's window histogram (which, with no
	// stability windows, only accumulates) into their interval's.
	seen := 0
	take := func(a *aggregator) {
		if len(a.series) <= seen {
			return
		}
		first, last := intervalOf(seen), intervalOf(len(a.series)-1)
		hists[last].Merge(a.winHist)
		a.winHist.Reset()
		if first != last && last < n-1 {
			notes[last] = fmt.Sprintf("seconds %d-%d were finalised together; their latencies count here", seen, len(a.series)-1)
		}
		seen = len(a.series)
	}

	// Scrapes at the bounds: snaps[0] before the run, snaps[k] at the end
	// of interval k-1, snaps[n] after the drain.
	snaps := make([]*MetricsSnapshot, n+1)
	scrapeErrs := make([]error, n+1)
	var wg sync.WaitGroup
	scrapeAt := func(k int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snaps[k], scrapeErrs[k] = c.scrape(ctx)
		}()
	}
	snaps[0], scrapeErrs[0] = c.scrape(ctx)

	r := &Result{Load: load, Transport: c.o.Transport, Connections: c.o.Connections, OfferedRate: load.Rate}
	nextBound := 1
	spec := runSpec{
		load: load, phase: PhaseMeasuring, bucket: time.Second, drain: so.DrainTimeout, progress: so.Progress,
		decide: func(now int64, a *aggregator, _ int, _ bool) (StopReason, string) {
			take(a)
			for nextBound < n && now >= int64(time.Duration(nextBound)*so.Interval) {
				scrapeAt(nextBound)
				nextBound++
			}
			if now >= int64(so.Duration) {
				return StopSoakDone, fmt.Sprintf("held %g req/s for %s", load.Rate, so.Duration)
			}
			return "", ""
		},
	}
	c.log.Debug("probe: soak start", "model", c.t.Model, "load", load.String(), "duration", so.Duration, "interval", so.Interval)
	cpu0, cpuOK := ProcessCPU()
	out := c.run(ctx, spec)
	cpu1, _ := ProcessCPU()
	take(out.a)
	wg.Wait()
	snaps[n], scrapeErrs[n] = c.scrape(ctx)

	r.fillCounts(load, out)
	r.fillGenerator(load, out, cpu1-cpu0, cpuOK)
	r.judgeValidity(load, out, MeasureOptions{MaxPacingLag: so.MaxPacingLag, MaxCPU: so.MaxCPU}, cpuOK)
	r.Server = deltaOrError(snaps[0], snaps[n], scrapeErrs[0], scrapeErrs[n], c.metricsURL, c.t.Model)

	res := &SoakResult{Result: r, Intervals: make([]Interval, n)}
	for i := range res.Intervals {
		iv := &res.Intervals[i]
		iv.Index, iv.Start = i, time.Duration(i)*so.Interval
		iv.Dur = min(so.Interval, so.Duration-iv.Start)
		iv.Latency = PercentilesOf(hists[i])
		if hists[i].TotalCount() > 0 {
			iv.Quantile = usToDur(hists[i].ValueAtQuantile(100 * so.Quantile))
		}
		iv.Server = deltaOrError(snaps[i], snaps[i+1], scrapeErrs[i], scrapeErrs[i+1], c.metricsURL, c.t.Model)
		iv.Note = notes[i]
	}
	for _, s := range out.a.series {
		iv := &res.Intervals[intervalOf(s.T)]
		iv.Sent += s.Sent
		iv.OK += s.OK
		iv.Errors += s.Errors
	}
	c.log.Debug("probe: soak end", "model", c.t.Model, "qps", r.QPS, "p99", r.Latency.P99, "valid", r.Valid)
	if out.cause != nil {
		return res, fmt.Errorf("probe: soak cancelled: %w", out.cause)
	}
	return res, nil
}

// deltaOrError is DeltaMetrics of two scrapes, or why there is none.
func deltaOrError(before, after *MetricsSnapshot, errBefore, errAfter error, url, model string) ServerMetrics {
	switch {
	case url == "":
		return ServerMetrics{Error: "not scraped: no metrics URL (give the REST address or a metrics URL)"}
	case errBefore != nil:
		return ServerMetrics{Error: errBefore.Error()}
	case errAfter != nil:
		return ServerMetrics{Error: errAfter.Error()}
	case before == nil || after == nil:
		return ServerMetrics{Error: "not scraped"}
	}
	return DeltaMetrics(before, after, model)
}
