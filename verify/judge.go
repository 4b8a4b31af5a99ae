package verify

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/store"
)

// Thresholds of the cause rules. They name a likely cause, never decide
// the verdict.
const (
	// A mean batch under this share of max_batch_size is "far under".
	underfilled = 0.5
	// ... and over this share "full".
	filled = 0.8
	// A queueing share of server latency over this is "high".
	queueHigh = 0.5
	// The last third's mean quantile over the first third's by this
	// factor is a trend.
	trendFactor = 1.5
)

// Judge sets v's verdict, failures and causes from its figures (filled by
// Fill, or synthetic in tests). invalid, when not empty, is why the load
// generator's figures cannot be trusted: the verdict is then
// store.VerifyInvalid and the configuration is not judged, unless the
// server's errors alone broke the bound (they came at a load no higher
// than the target, so the soak failed whatever the generator did).
//
// The soak passes when every interval's quantile is at most v.SLO (an
// interval with no successful request fails), the error rate (requests
// never answered count as failed) is at most v.MaxErrorRate, and the rate
// was kept.
func Judge(v *store.Verification, invalid string) {
	v.Failures, v.Causes = nil, nil
	qn := quantileName(v.Quantile)
	var over []int
	for i := range v.Intervals {
		iv := &v.Intervals[i]
		iv.Over = iv.OK == 0 || iv.Quantile > v.SLO
		if !iv.Over {
			continue
		}
		over = append(over, i)
		if iv.OK == 0 {
			v.Failures = append(v.Failures, fmt.Sprintf("interval %d (%s-%s): no request succeeded", i+1, secs(iv.Start), secs(iv.Start+iv.Dur)))
		} else {
			v.Failures = append(v.Failures, fmt.Sprintf("interval %d (%s-%s): %s %s over the SLO %s", i+1, secs(iv.Start), secs(iv.Start+iv.Dur), qn, ms(iv.Quantile), ms(v.SLO)))
		}
	}
	if len(v.Intervals) == 0 {
		v.Failures = append(v.Failures, "no interval was measured")
	}
	errorsOver := v.ErrorRate > v.MaxErrorRate
	errorFailure := ""
	if errorsOver {
		errorFailure = fmt.Sprintf("error rate %s over the bound %s (%s)", pct(v.ErrorRate), pct(v.MaxErrorRate), errorList(v))
		v.Failures = append(v.Failures, errorFailure)
	}
	if invalid != "" {
		// The generator fell behind: latency (which counts its lag) and
		// the rate say nothing of the server. Errors are the server's own
		// answers, at a load no higher than the target: they still fail it.
		if !errorsOver {
			v.Verdict = store.VerifyInvalid
			v.Failures = []string{"not judged: " + invalid}
			v.Causes = []store.Cause{{Name: "generator", Detail: "the load generator limited the soak (" + invalid + "); run verify on a quieter machine or with fewer connections"}}
			return
		}
		for i := range v.Intervals {
			v.Intervals[i].Over = false
		}
		v.Verdict = store.VerifyFailed
		v.Failures = []string{errorFailure, "the load generator fell behind (" + invalid + "): the errors came at a load no higher than the target; latency was not judged"}
		v.Causes = causes(v, nil, true)
		return
	}
	if !v.RateKept {
		note := v.RateNote
		if note == "" {
			note = fmt.Sprintf("sent %.1f of %g req/s", v.SentRate, v.Rate)
		}
		v.Failures = append(v.Failures, "rate not kept: "+note)
	}
	if len(v.Failures) == 0 {
		v.Verdict = store.VerifyPassed
		return
	}
	v.Verdict = store.VerifyFailed
	v.Causes = causes(v, over, errorsOver)
}

// causes names the likely reasons of a failed soak, most likely first.
func causes(v *store.Verification, over []int, errorsOver bool) []store.Cause {
	var out []store.Cause
	add := func(name, format string, args ...any) {
		out = append(out, store.Cause{Name: name, Detail: fmt.Sprintf(format, args...)})
	}
	maxBatch := param(v.Config, search.MaxBatchSize)
	timeout := param(v.Config, search.BatchTimeoutMicros)
	threads := param(v.Config, search.NumBatchThreads)
	queue := param(v.Config, search.MaxEnqueuedBatches)

	// Errors first: they say the most.
	var rejected float64
	for _, iv := range v.Intervals {
		rejected += iv.Rejected
	}
	unavailable := v.Errors["Unavailable"]
	if errorsOver || rejected > 0 {
		if rejected > 0 {
			hold := ""
			if queue > 0 && maxBatch > 0 {
				hold = fmt.Sprintf(": max_enqueued_batches %d x max_batch_size %d queue at most %d requests", queue, maxBatch, queue*maxBatch)
			}
			add("queue_full", "the server refused %.0f requests as UNAVAILABLE, its batch queue full%s; raise max_enqueued_batches (or num_batch_threads, %d now), or hold a lower rate",
				rejected, hold, threads)
		}
		if missing := float64(unavailable) - rejected; missing > max(1, 0.1*float64(unavailable)) {
			add("connections", "%.0f requests failed UNAVAILABLE that the server never counted: connections refused or dropped, or the server restarting; check the server's log, its gRPC threads (--grpc_max_threads) and the connections", missing)
		}
		var other []string
		for code, n := range v.Errors {
			if code != "Unavailable" && code != "DeadlineExceeded" {
				other = append(other, fmt.Sprintf("%s %d", code, n))
			}
		}
		if len(other) > 0 {
			sort.Strings(other)
			add("errors", "the server answered with errors: %s (INVALID_ARGUMENT: a request's batch over max_batch_size)", strings.Join(other, ", "))
		}
	}

	if len(over) > 0 {
		// The server's view of the intervals that broke the SLO.
		var batch, share float64
		var n int
		for _, i := range over {
			iv := v.Intervals[i]
			if iv.MeanBatch > 0 || iv.QueueShare > 0 {
				batch += iv.MeanBatch
				share += iv.QueueShare
				n++
			}
		}
		if n == 0 {
			batch, share = v.MeanBatch, v.QueueShare
		} else {
			batch, share = batch/float64(n), share/float64(n)
		}
		switch {
		case batch == 0 && share == 0:
			add("metrics", "the server's metrics were not scraped, so the latency cannot be placed (%s)", firstNonEmpty(v.Note, "no batching metrics"))
		case maxBatch > 0 && batch < underfilled*float64(maxBatch) && timeout > 0 && share >= 0.3:
			add("batch_timeout", "batches closed on the timeout, not full (mean batch %.1f of max_batch_size %d) while %.0f%% of the latency was queueing: the wait is batch_timeout_micros %d (%s, %.0f%% of the SLO); lower it",
				batch, maxBatch, 100*share, timeout, ms(time.Duration(timeout)*time.Microsecond), 100*float64(timeout)*1e3/float64(v.SLO))
		case share >= queueHigh && maxBatch > 0 && batch >= filled*float64(maxBatch):
			add("threads", "batches were full (mean %.1f of %d) and still %.0f%% of the latency was queueing: num_batch_threads %d cannot keep up with %g req/s; raise num_batch_threads or max_batch_size, or the rate is over this server's capacity",
				batch, maxBatch, 100*share, threads, v.Rate)
		case share >= queueHigh:
			add("threads", "%.0f%% of the latency was queueing for a batch thread (mean batch %.1f): too few threads, num_batch_threads %d", 100*share, batch, threads)
		default:
			add("execution", "only %.0f%% of the latency was queueing (mean batch %.1f): the time goes to executing batches or outside the batching queue; check tensorflow_intra_op/inter_op parallelism, the gRPC threads and the machine's other load", 100*share, batch)
		}
		// Timeouts and unanswered requests follow from the latency.
		lateCauses(v, add)
		// The shape of the series.
		if t := trend(v.Intervals); t != "" {
			add("trend", "%s", t)
		} else if len(over) < len(v.Intervals) && isolated(over) {
			var which []string
			for _, i := range over {
				which = append(which, fmt.Sprint(i+1))
			}
			add("stall", "intervals %s broke the SLO between intervals that met it: a stall (a model reload, a garbage collection, another job on the machine), not a steady overload", strings.Join(which, ", "))
		}
	}
	if len(over) == 0 && errorsOver {
		lateCauses(v, add)
	}
	if !v.RateKept {
		add("over_capacity", "the server fell behind the offered rate (%s): %g req/s is over what this configuration sustains", firstNonEmpty(v.RateNote, "rate not kept"), v.Rate)
	}
	return out
}

// lateCauses names requests that timed out or were never answered: the
// server fell behind.
func lateCauses(v *store.Verification, add func(name, format string, args ...any)) {
	if n := v.Errors["DeadlineExceeded"]; n > 0 {
		add("deadline", "%d requests ran past their deadline (load.request_timeout): the server fell far behind", n)
	}
	if v.Unfinished > 0 {
		add("unanswered", "%d requests were never answered by the end of the drain", v.Unfinished)
	}
}

// trend describes latency that grew across the soak: the mean quantile of
// the last third of the intervals over the first third's by trendFactor,
// with the middle third between them; "" when it did not.
func trend(ivs []store.VerifyInterval) string {
	n := len(ivs) / 3
	if n == 0 {
		return ""
	}
	// An interval in which nothing succeeded is at least as slow as the
	// slowest before it.
	q := make([]float64, len(ivs))
	for i, iv := range ivs {
		q[i] = float64(iv.Quantile)
		if iv.OK == 0 && i > 0 {
			q[i] = max(q[i], slices.Max(q[:i]))
		}
	}
	mean := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	first, mid, last := mean(q[:n]), mean(q[n:len(q)-n]), mean(q[len(q)-n:])
	if first <= 0 || last < trendFactor*first || mid < first || mid > last {
		return ""
	}
	return fmt.Sprintf("the latency grew through the soak (first third %s, last third %s): a backlog building or a slow leak; the rate is over what the server sustains for long",
		ms(time.Duration(first)), ms(time.Duration(last)))
}

// isolated reports whether no two of the (sorted) interval indexes are
// adjacent: failures separated by passing intervals.
func isolated(idx []int) bool {
	for i := 1; i < len(idx); i++ {
		if idx[i] == idx[i-1]+1 {
			return false
		}
	}
	return true
}

func errorList(v *store.Verification) string {
	var parts []string
	for code, n := range v.Errors {
		parts = append(parts, fmt.Sprintf("%s %d", code, n))
	}
	sort.Strings(parts)
	if v.Unfinished > 0 {
		parts = append(parts, fmt.Sprintf("unanswered %d", v.Unfinished))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func quantileName(q float64) string {
	if q == 0 {
		q = 0.99
	}
	return "P" + strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", 100*q), "0"), ".")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func secs(d time.Duration) string { return fmt.Sprintf("%gs", d.Seconds()) }

func pct(f float64) string { return fmt.Sprintf("%.4g%%", 100*f) }

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
