package probe

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// StopReason says why a measurement ended.
type StopReason string

// Stop reasons.
const (
	// StopStable: throughput and P99 met the stability rule (see
	// MeasureOptions) after MinDuration.
	StopStable StopReason = "stable"
	// StopMaxDuration: MaxDuration passed before the rule was met. The
	// figures are still valid; the Stability section says how far off it was.
	StopMaxDuration StopReason = "max-duration"
	// StopSLOBreach: more requests were over the SLO's latency target than
	// its tail budget (1% for P99) allows, so the run could only end in
	// breach.
	StopSLOBreach StopReason = "slo-breach"
	// StopErrorBudget: more requests failed than the SLO's error budget allows.
	StopErrorBudget StopReason = "error-budget"
	// StopDominated: the run's throughput is below MeasureOptions.StopBelow
	// with 99.9% confidence (a tuner's best trial so far: the figure this
	// one had to beat to matter), so more precision would change nothing
	// the caller decides. The figures are valid, from a shorter run.
	StopDominated StopReason = "dominated"
	// StopCancelled: the caller's context ended; the Result is partial and
	// marked invalid.
	StopCancelled StopReason = "cancelled"
	// StopWarmedUp and StopWarmupCount end a warmup (settled latency, or the
	// requested count).
	StopWarmedUp    StopReason = "settled"
	StopWarmupCount StopReason = "count"
)

// SLO is the service-level objective a trial is held to. Measure uses it
// only to stop early once a breach is certain; scoring is the caller's.
type SLO struct {
	// Latency is the target for the Quantile of corrected latency (from
	// the intended send time); 0 means no latency target.
	Latency time.Duration `json:"latency_ns,omitempty"`
	// Quantile is the latency quantile held to Latency; 0.99 when 0.
	Quantile float64 `json:"quantile,omitempty"`
	// ErrorRate is the largest acceptable share of failed requests: 0
	// allows none, 0.001 one in a thousand; >= 1 disables the check.
	ErrorRate float64 `json:"error_rate"`
}

// tail is the share of requests the latency target lets be slower.
func (s *SLO) tail() float64 {
	if s.Quantile == 0 {
		return 0.01
	}
	return 1 - s.Quantile
}

func (s *SLO) quantileName() string {
	q := 0.99
	if s.Quantile != 0 {
		q = s.Quantile
	}
	return "P" + strconv.FormatFloat(100*q, 'g', -1, 64)
}

// zCertain is the one-sided normal quantile for 99.9% confidence, used when
// the number of requests a run will count has no hard upper bound.
const zCertain = 3.0902

// minJudged is the fewest requests the statistical test decides on: the
// first few requests of a run share one transient and are not independent
// draws, whatever the interval says.
const minJudged = 20

// breachCheck decides whether the SLO is already certainly broken.
//
// slow counts requests known to be over the latency target: completed ones
// whose corrected latency exceeds it and in-flight ones already older than
// it (they can only finish late, or fail). judged counts requests with a latency
// verdict (successful completions plus those slow in-flight ones); failed
// and completed count errors and all completions.
//
// upper is a hard bound on the requests the run can count by MaxDuration
// when one is known (open loop: the pacer's schedule), else 0. With a bound
// the test is exact counting: more than the tail share (1% for P99) of
// upper already slow means the quantile over any run ending by MaxDuration
// is over target, whatever the rest does. Without one (closed loop) the
// test is statistical: the Wilson score lower bound of the slow share at
// 99.9% confidence is above the tail share.
// The error budget is tested the same way.
func breachCheck(s *SLO, judged, slow, completed, failed int64, upper int64) (StopReason, string) {
	if s == nil {
		return "", ""
	}
	if tail := s.tail(); s.Latency > 0 && slow > 0 {
		if upper > 0 {
			if allowed := int64(math.Floor(tail * float64(upper))); slow > allowed {
				return StopSLOBreach, fmt.Sprintf("%d requests over the %s target %s exceed the tail budget (%d = %g%% of the at most %d requests this run can send)",
					slow, s.quantileName(), s.Latency, allowed, 100*tail, upper)
			}
		} else if lo := wilsonLower(slow, judged, zCertain); judged >= minJudged && lo > tail {
			return StopSLOBreach, fmt.Sprintf("%d of %d requests over the %s target %s: the slow share is above %g%% with 99.9%% confidence (lower bound %.2f%%)",
				slow, judged, s.quantileName(), s.Latency, 100*tail, 100*lo)
		}
	}
	if s.ErrorRate < 1 && failed > 0 {
		if upper > 0 {
			if allowed := int64(math.Floor(s.ErrorRate * float64(upper))); failed > allowed {
				return StopErrorBudget, fmt.Sprintf("%d failed requests exceed the error budget (%d = %g of the at most %d requests this run can send)",
					failed, allowed, s.ErrorRate, upper)
			}
		} else if s.ErrorRate == 0 {
			return StopErrorBudget, fmt.Sprintf("%d failed requests; the error budget is 0", failed)
		} else if lo := wilsonLower(failed, completed, zCertain); completed >= minJudged && lo > s.ErrorRate {
			return StopErrorBudget, fmt.Sprintf("%d of %d requests failed: the error rate is above the budget %g with 99.9%% confidence (lower bound %.3g)",
				failed, completed, s.ErrorRate, lo)
		}
	}
	return "", ""
}

// wilsonLower is the lower end of the Wilson score interval for k successes
// in n trials at normal quantile z.
func wilsonLower(k, n int64, z float64) float64 {
	if n <= 0 {
		return 0
	}
	p := float64(k) / float64(n)
	nn := float64(n)
	z2 := z * z
	centre := p + z2/(2*nn)
	margin := z * math.Sqrt(p*(1-p)/nn+z2/(4*nn*nn))
	return (centre - margin) / (1 + z2/nn)
}

// window is one stability window: consecutive whole seconds holding at
// least minWindowSamples successful requests (so that its P99 means
// something), at least the configured window length.
type window struct {
	Start time.Duration
	Dur   time.Duration
	OK    int64
	P99   time.Duration
}

func (w window) throughput() float64 { return float64(w.OK) / w.Dur.Seconds() }

// minWindowSamples is the fewest successful requests a window needs before
// it closes: below 100 the "99th percentile" of a window is its maximum.
const minWindowSamples = 100

// Stability reports the stopping rule's last evaluation. Half-widths are of
// 95% confidence intervals, and zero when there are fewer than two windows.
type Stability struct {
	Windows int `json:"windows"`
	// ThroughputMean and ThroughputHalfWidth: the mean of the windows'
	// throughputs (successful requests/s) and its Student-t interval.
	ThroughputMean      float64 `json:"throughput_mean"`
	ThroughputHalfWidth float64 `json:"throughput_half_width"`
	// P99WindowMean and P99WindowHalfWidth: the mean of the windows' P99s
	// and its Student-t interval (batch means: it sees drift and
	// correlation between neighbouring requests).
	P99WindowMean      time.Duration `json:"p99_window_mean_ns"`
	P99WindowHalfWidth time.Duration `json:"p99_window_half_width_ns"`
	// P99Low and P99High bound the pooled P99 by order statistics: the
	// values at ranks n(0.99 ∓ 1.96·sqrt(0.99·0.01/n)).
	P99Low  time.Duration `json:"p99_low_ns"`
	P99High time.Duration `json:"p99_high_ns"`
	Stable  bool          `json:"stable"`
	// Unmet says which condition failed; empty when Stable.
	Unmet string `json:"unmet,omitempty"`
}

// quantiler is what the rule needs of the pooled histogram.
type quantiler interface {
	ValueAtQuantile(q float64) int64 // q in percent; value in microseconds
	TotalCount() int64
}

// stabilityRule holds the tolerances of MeasureOptions.
type stabilityRule struct {
	minWindows int
	tolT, tolP float64
}

// evaluate applies the rule documented on MeasureOptions to the closed
// windows and the pooled latency histogram.
func (r stabilityRule) evaluate(ws []window, pooled quantiler) Stability {
	st := Stability{Windows: len(ws)}
	tp := make([]float64, len(ws))
	p99 := make([]float64, len(ws))
	for i, w := range ws {
		tp[i] = w.throughput()
		p99[i] = float64(w.P99)
	}
	var tpHalf, pHalf, pMean float64
	st.ThroughputMean, tpHalf = meanCI(tp)
	pMean, pHalf = meanCI(p99)
	if len(ws) >= 2 { // JSON has no +Inf: with fewer windows the widths stay 0 and Unmet says why
		st.ThroughputHalfWidth = tpHalf
		st.P99WindowHalfWidth = time.Duration(pHalf)
	}
	st.P99WindowMean = time.Duration(pMean)
	n := pooled.TotalCount()
	var p99Pooled float64
	if n > 0 {
		d := 1.96 * math.Sqrt(0.99*0.01/float64(n))
		st.P99Low = time.Duration(pooled.ValueAtQuantile(100*(0.99-d))) * time.Microsecond
		st.P99High = time.Duration(pooled.ValueAtQuantile(math.Min(100, 100*(0.99+d)))) * time.Microsecond
		p99Pooled = float64(pooled.ValueAtQuantile(99)) * float64(time.Microsecond)
	}
	switch {
	case len(ws) < max(r.minWindows, 2):
		st.Unmet = fmt.Sprintf("%d of %d windows", len(ws), max(r.minWindows, 2))
	case !(tpHalf <= r.tolT*st.ThroughputMean):
		st.Unmet = fmt.Sprintf("throughput ±%.1f%% > ±%.1f%%", pct(tpHalf, st.ThroughputMean), 100*r.tolT)
	case !(pHalf <= r.tolP*pMean):
		st.Unmet = fmt.Sprintf("window P99 ±%.1f%% > ±%.1f%%", pct(pHalf, pMean), 100*r.tolP)
	case !(float64(st.P99High-st.P99Low)/2 <= r.tolP*p99Pooled):
		st.Unmet = fmt.Sprintf("pooled P99 interval ±%.1f%% > ±%.1f%%", pct(float64(st.P99High-st.P99Low)/2, p99Pooled), 100*r.tolP)
	default:
		st.Stable = true
	}
	return st
}

func pct(half, mean float64) float64 {
	if mean == 0 {
		return math.Inf(1)
	}
	return 100 * half / mean
}

// dominatedLevel is the one-sided confidence with which a run's throughput
// must be below MeasureOptions.StopBelow before it stops as dominated, the
// same 99.9% as a certain SLO breach.
const dominatedLevel = 0.999

// dominatedCheck decides whether the windows so far put the mean
// throughput below bar with dominatedLevel confidence: the upper end of
// the one-sided Student-t interval of the windows' mean throughput is
// under bar. Windows, not requests, are the samples, as in the stability
// rule, so that correlated stretches widen the interval instead of
// hiding in it. It needs minWindows windows (2 at least) and bar > 0.
func dominatedCheck(bar float64, minWindows int, ws []window) (StopReason, string) {
	if !(bar > 0) || len(ws) < max(minWindows, 2) {
		return "", ""
	}
	tp := make([]float64, len(ws))
	for i, w := range ws {
		tp[i] = w.throughput()
	}
	mean, half := meanCIAt(tp, dominatedLevel)
	if upper := mean + half; upper < bar {
		return StopDominated, fmt.Sprintf("throughput %.1f req/s over %d windows, below the %.1f req/s to beat with %g%% confidence (upper bound %.1f)",
			mean, len(ws), bar, 100*dominatedLevel, upper)
	}
	return "", ""
}

// meanCI returns the mean of xs and the half-width of its 95% Student-t
// confidence interval (+Inf for fewer than two values).
func meanCI(xs []float64) (mean, half float64) { return meanCIAt(xs, 0.975) }

// meanCIAt returns the mean of xs and t(p, n-1)·sd/√n: the half-width of
// the two-sided interval at level 2p-1, or the one-sided bound's distance
// at level p (+Inf for fewer than two values).
func meanCIAt(xs []float64, p float64) (mean, half float64) {
	n := float64(len(xs))
	if len(xs) == 0 {
		return 0, math.Inf(1)
	}
	for _, x := range xs {
		mean += x
	}
	mean /= n
	if len(xs) < 2 {
		return mean, math.Inf(1)
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / (n - 1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(p)
	return mean, t * sd / math.Sqrt(n)
}

// settled is the warmup rule: the last three buckets' median latencies
// each lie within ±tol of their mean. Cold starts show as medians falling
// bucket after bucket; once three agree, latency has stopped improving.
func settled(p50s []time.Duration, tol float64) bool {
	if len(p50s) < 3 {
		return false
	}
	last := p50s[len(p50s)-3:]
	var mean float64
	for _, v := range last {
		mean += float64(v)
	}
	mean /= 3
	for _, v := range last {
		if math.Abs(float64(v)-mean) > tol*mean {
			return false
		}
	}
	return true
}
