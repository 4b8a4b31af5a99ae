package probe

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Result is one measurement. Latency is corrected: it counts from each
// request's intended send time (in closed loop, its actual send), so a
// stalled server cannot hide behind requests that were never sent.
// ServiceTime counts from the actual send, as ghz and perf_analyzer do;
// the gap between the two is what they would have hidden. Latency
// histograms hold successful requests, plus unfinished ones at a lower
// bound (time waited until given up); failed requests are counted by code.
type Result struct {
	// Valid is false when the generator itself limited the run (CPU
	// saturation, pacing lag, cancellation); such a result must not be
	// scored. InvalidReason says why.
	Valid         bool   `json:"valid"`
	InvalidReason string `json:"invalid_reason,omitempty"`

	StopReason StopReason `json:"stop_reason"`
	StopDetail string     `json:"stop_detail,omitempty"`

	Load        Load      `json:"load"`
	Transport   Transport `json:"transport"`
	Connections int       `json:"connections"`
	SLO         *SLO      `json:"slo,omitempty"`

	// Duration is the measured interval: from the first send to the stop.
	Duration time.Duration `json:"duration_ns"`
	// Requests completed (successes and failures), including those that
	// completed while draining after the stop.
	Requests int64 `json:"requests"`
	OK       int64 `json:"ok"`
	// Errors counts failed requests by gRPC code name (REST statuses are
	// mapped to the gRPC code of the same failure).
	Errors    map[string]int64 `json:"errors,omitempty"`
	ErrorRate float64          `json:"error_rate"`
	// Unfinished counts requests still in flight when the drain ended, and
	// open-loop requests due but never sent.
	Unfinished int64 `json:"unfinished,omitempty"`

	// QPS is the achieved throughput: successful responses completed
	// within Duration, per second.
	QPS float64 `json:"qps"`
	// OfferedRate is the open-loop target and SentRate the rate requests
	// actually left at; RateKept is false when the offered rate could not be
	// kept, and RateNote says why.
	OfferedRate float64 `json:"offered_rate,omitempty"`
	SentRate    float64 `json:"sent_rate,omitempty"`
	RateKept    bool    `json:"rate_kept"`
	RateNote    string  `json:"rate_note,omitempty"`

	Latency     Percentiles `json:"latency"`
	ServiceTime Percentiles `json:"service_time"`
	Stability   Stability   `json:"stability"`

	Generator GeneratorStats `json:"generator"`
	Server    ServerMetrics  `json:"server"`
	Series    []Second       `json:"series,omitempty"`
}

// GeneratorStats describe the load generator's own effort, the evidence
// for the invalid-measurement guard.
type GeneratorStats struct {
	// CPU is this process's CPU time (user+system, getrusage) over the
	// run; CPUUtil its share of Cores (GOMAXPROCS) over Duration.
	CPU           time.Duration `json:"cpu_ns"`
	CPUUtil       float64       `json:"cpu_util"`
	CPUPerRequest time.Duration `json:"cpu_per_request_ns"`
	Cores         int           `json:"cores"`
	PeakWorkers   int           `json:"peak_workers"`
	// Open loop: the worker bound, how many requests had to wait for a
	// worker at that bound, and the pacing lag (actual - intended send).
	WorkerBound int           `json:"worker_bound,omitempty"`
	BoundWaits  int64         `json:"bound_waits,omitempty"`
	LagP50      time.Duration `json:"lag_p50_ns,omitempty"`
	LagP99      time.Duration `json:"lag_p99_ns,omitempty"`
	LagMax      time.Duration `json:"lag_max_ns,omitempty"`
	Note        string        `json:"note,omitempty"`
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.3fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return d.Round(time.Millisecond).String()
}

// Summary renders r for people: a few aligned lines, no trailing newline.
func Summary(r *Result) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	verdict := "valid"
	if !r.Valid {
		verdict = "INVALID: " + r.InvalidReason
	}
	if r.Transport == REST {
		line("load        %s over REST (a keep-alive connection per request in flight)", r.Load)
	} else {
		line("load        %s over %d %s connection(s)", r.Load, r.Connections, r.Transport)
	}
	line("result      %s", verdict)
	stop := string(r.StopReason)
	if r.StopDetail != "" {
		stop += ": " + r.StopDetail
	}
	line("stopped     %s after %s", stop, r.Duration.Round(time.Millisecond))
	line("throughput  %.1f req/s (%d ok of %d completed)", r.QPS, r.OK, r.Requests)
	if r.Load.Open() {
		kept := "kept"
		if !r.RateKept {
			kept = "NOT kept: " + r.RateNote
		}
		line("rate        offered %g req/s, sent %.1f req/s, %s", r.OfferedRate, r.SentRate, kept)
	}
	errs := "none"
	if len(r.Errors) > 0 {
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Errors[k]))
		}
		errs = fmt.Sprintf("%.3f%% (%s)", 100*r.ErrorRate, strings.Join(parts, ", "))
	}
	line("errors      %s", errs)
	if r.Unfinished > 0 {
		line("unfinished  %d (counted in latency at their time waited, a lower bound)", r.Unfinished)
	}
	p := func(name string, q Percentiles) {
		line("%-11s p50 %s  p90 %s  p95 %s  p99 %s  p99.9 %s  max %s  mean %s",
			name, ms(q.P50), ms(q.P90), ms(q.P95), ms(q.P99), ms(q.P999), ms(q.Max), ms(q.Mean))
	}
	p("latency", r.Latency)
	p("service", r.ServiceTime)
	st := r.Stability
	line("stability   %d windows, throughput ±%.1f%%, window P99 ±%.1f%%, P99 95%% interval %s..%s",
		st.Windows, pct(st.ThroughputHalfWidth, st.ThroughputMean), pct(float64(st.P99WindowHalfWidth), float64(st.P99WindowMean)),
		ms(st.P99Low), ms(st.P99High))
	g := r.Generator
	gen := fmt.Sprintf("CPU %.2fs (%.0f%% of %d cores, %s/request), peak workers %d", g.CPU.Seconds(), 100*g.CPUUtil, g.Cores,
		time.Duration(g.CPUPerRequest), g.PeakWorkers)
	if r.Load.Open() {
		gen += fmt.Sprintf(", pacing lag p99 %s max %s", ms(g.LagP99), ms(g.LagMax))
	}
	line("generator   %s", gen)
	s := r.Server
	if s.Batches > 0 || len(s.RequestCount) > 0 {
		var rc []string
		keys := make([]string, 0, len(s.RequestCount))
		for k := range s.RequestCount {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			rc = append(rc, fmt.Sprintf("%s %.0f", k, s.RequestCount[k]))
		}
		line("server      mean batch %.2f over %.0f batches, queuing %s of %s (%.0f%%), padding %.1f%%, requests: %s",
			s.MeanBatchSize, s.Batches, ms(s.MeanQueuingLatency), ms(s.MeanRequestLatency), 100*s.QueuingShare, 100*s.PaddingShare,
			strings.Join(rc, ", "))
	}
	if s.Error != "" {
		line("server      metrics: %s", s.Error)
	}
	return strings.TrimRight(b.String(), "\n")
}
