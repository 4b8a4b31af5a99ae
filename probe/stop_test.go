package probe

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

func TestBreachCheck(t *testing.T) {
	slo := &SLO{Latency: 10 * time.Millisecond, ErrorRate: 0.01}
	tests := []struct {
		name                               string
		slo                                *SLO
		judged, slow, completed, failed, n int64 // n: the hard upper bound, 0 when none
		want                               StopReason
	}{
		// No SLO, no verdict.
		{"no slo", nil, 100, 100, 100, 100, 0, ""},
		// Open loop, 1000 requests at most: 10 slow is exactly the 1% budget.
		{"at budget", slo, 500, 10, 500, 0, 1000, ""},
		// The 11th slow request makes the breach certain.
		{"over budget", slo, 500, 11, 500, 0, 1000, StopSLOBreach},
		// Certain long before the run ends: 11 slow among the first 20.
		{"certain early", slo, 20, 11, 20, 0, 1000, StopSLOBreach},
		// Closed loop, no bound: 20 of 20 slow is beyond doubt.
		{"closed all slow", slo, 20, 20, 20, 0, 0, StopSLOBreach},
		// ...but 5 of 5 are too few to call (one shared transient).
		{"closed too few", slo, 5, 5, 5, 0, 0, ""},
		// Closed loop: 2 slow of 1000 (0.2%) proves nothing against 1%.
		{"closed few slow", slo, 1000, 2, 1000, 0, 0, ""},
		// Closed loop: 30 of 1000 (3%) is above 1% with 99.9% confidence.
		{"closed many slow", slo, 1000, 30, 1000, 0, 0, StopSLOBreach},
		// P99.9 target: 0.1% tail, so 2 slow of an open run of 1000 breach.
		{"p99.9 tail", &SLO{Latency: 10 * time.Millisecond, Quantile: 0.999, ErrorRate: 1}, 100, 2, 100, 0, 1000, StopSLOBreach},
		// Errors: budget 1% of at most 1000 requests is 10; 11 breach.
		{"errors over budget", slo, 100, 0, 111, 11, 1000, StopErrorBudget},
		// A zero error budget breaks on the first failure.
		{"zero budget", &SLO{ErrorRate: 0}, 10, 0, 10, 1, 0, StopErrorBudget},
		// A budget of 1 disables the error check.
		{"errors disabled", &SLO{ErrorRate: 1}, 0, 0, 10, 10, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, detail := breachCheck(tt.slo, tt.judged, tt.slow, tt.completed, tt.failed, tt.n)
			if got != tt.want {
				t.Errorf("breachCheck = %q (%s), want %q", got, detail, tt.want)
			}
			if got != "" && detail == "" {
				t.Error("a breach without a reason")
			}
		})
	}
}

func TestWilsonLower(t *testing.T) {
	// With p̂ = 0.5, n = 100, z = 1.96 the Wilson interval is
	// 0.4038..0.5962 (the textbook example).
	if got := wilsonLower(50, 100, 1.96); math.Abs(got-0.4038) > 0.0005 {
		t.Errorf("wilsonLower(50, 100) = %.4f, want 0.4038", got)
	}
	if got := wilsonLower(0, 100, 3); got != 0 {
		t.Errorf("no successes: lower bound %g, want 0", got)
	}
}

func TestMeanCI(t *testing.T) {
	// Five values with mean 10 and sd 1: half-width t(0.975, 4)·1/√5,
	// t(0.975, 4) = 2.7764 from any t table.
	xs := []float64{10 - math.Sqrt(2), 10 - math.Sqrt(0.5), 10, 10 + math.Sqrt(0.5), 10 + math.Sqrt(2)}
	mean, half := meanCI(xs)
	want := 2.7764 / math.Sqrt(5) * math.Sqrt(5.0/4)
	if math.Abs(mean-10) > 1e-9 || math.Abs(half-want) > 1e-3 {
		t.Errorf("meanCI = %g ± %g, want 10 ± %.4f", mean, half, want)
	}
	if _, half := meanCI([]float64{1}); !math.IsInf(half, 1) {
		t.Errorf("one value: half-width %g, want +Inf", half)
	}
}

func TestDominatedCheck(t *testing.T) {
	// Window throughputs 990, 1000, 1010: mean 1000, sd 10; the one-sided
	// 99.9% bound is 1000 + t(0.999, 2)·10/√3 with t(0.999, 2) = 22.327
	// from any t table: 1128.9.
	ws := []window{
		{Dur: time.Second, OK: 990},
		{Dur: time.Second, OK: 1000},
		{Dur: 2 * time.Second, OK: 2020},
	}
	if why, detail := dominatedCheck(1130, 3, ws); why != StopDominated || !strings.Contains(detail, "upper bound 1128.9") {
		t.Errorf("bar 1130: %q %q, want dominated with upper bound 1128.9", why, detail)
	}
	if why, _ := dominatedCheck(1128, 3, ws); why != "" {
		t.Errorf("bar 1128 is inside the bound 1128.9: %q, want no stop", why)
	}
	if why, _ := dominatedCheck(1e9, 4, ws); why != "" {
		t.Errorf("3 windows of the 4 asked for: %q, want no stop", why)
	}
	if why, _ := dominatedCheck(1e9, 0, ws[:1]); why != "" {
		t.Errorf("one window has no interval: %q, want no stop", why)
	}
	if why, _ := dominatedCheck(0, 3, ws); why != "" {
		t.Errorf("bar 0 disables the check: %q", why)
	}
}

// synthRun builds n one-second windows whose throughput and P99 vary by
// the given relative noise, and a pooled histogram of their latencies.
func synthRun(n int, noise float64, seed uint64) ([]window, quantiler) {
	rng := rand.New(rand.NewPCG(seed, 1))
	h := newHist()
	var ws []window
	lat := distuv.LogNormal{Mu: math.Log(2000), Sigma: 0.3, Src: rng} // µs
	for i := 0; i < n; i++ {
		scale := 1 + noise*(2*rng.Float64()-1)
		w := window{Start: time.Duration(i) * time.Second, Dur: time.Second, OK: int64(1000 * scale)}
		wh := newHist()
		for j := int64(0); j < w.OK; j++ {
			v := int64(lat.Rand() * scale)
			_ = h.RecordValue(v)
			_ = wh.RecordValue(v)
		}
		w.P99 = usToDur(wh.ValueAtQuantile(99))
		ws = append(ws, w)
	}
	return ws, h
}

func TestStabilityRule(t *testing.T) {
	rule := stabilityRule{minWindows: 5, tolT: 0.03, tolP: 0.10}
	tests := []struct {
		name    string
		windows int
		noise   float64
		stable  bool
		unmet   string
	}{
		// Ten steady windows (±1%): stable.
		{"steady", 10, 0.01, true, ""},
		// Too few windows, however steady.
		{"too few", 4, 0.01, false, "windows"},
		// ±30% swings in throughput: the interval is too wide.
		{"noisy", 10, 0.30, false, "throughput"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, h := synthRun(tt.windows, tt.noise, 3)
			st := rule.evaluate(ws, h)
			if st.Stable != tt.stable || !strings.Contains(st.Unmet, tt.unmet) {
				t.Errorf("Stable=%v Unmet=%q, want %v %q (%+v)", st.Stable, st.Unmet, tt.stable, tt.unmet, st)
			}
			if st.P99Low > st.P99High || st.P99Low == 0 {
				t.Errorf("P99 interval %s..%s", st.P99Low, st.P99High)
			}
		})
	}
	// P99 drifting up 10% a window (a queue building) with steady
	// throughput: condition 2 catches it.
	ws, h := synthRun(10, 0.005, 4)
	for i := range ws {
		ws[i].P99 = time.Duration(float64(ws[i].P99) * (1 + 0.10*float64(i)))
	}
	if st := rule.evaluate(ws, h); st.Stable || !strings.Contains(st.Unmet, "window P99") {
		t.Errorf("drifting window P99 judged %+v", st)
	}
	// "3 windows within 10%" would accept 3 noisy windows that happen to
	// agree; the rule wants MinWindows and a narrow interval.
	ws = []window{{Dur: time.Second, OK: 1000, P99: time.Millisecond}, {Dur: time.Second, OK: 1080, P99: time.Millisecond}, {Dur: time.Second, OK: 950, P99: time.Millisecond}}
	if st := rule.evaluate(ws, h); st.Stable {
		t.Errorf("3 windows within 10%% accepted: %+v", st)
	}
	// At the default floor of 3 windows it is the interval that refuses
	// them, not their number.
	three := stabilityRule{minWindows: 3, tolT: 0.03, tolP: 0.10}
	if st := three.evaluate(ws, h); st.Stable || !strings.Contains(st.Unmet, "throughput") {
		t.Errorf("3 windows within 10%% with a floor of 3: %+v, want refused on throughput", st)
	}
}

func TestSettled(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name string
		p50s []time.Duration
		want bool
	}{
		// A cold start falling to a plateau: settled once three agree.
		{"plateau", ms(100, 40, 12, 10, 10, 11), true},
		// Still falling: not settled.
		{"falling", ms(100, 50, 25, 12), false},
		// Fewer than three buckets can never settle.
		{"short", ms(10, 10), false},
	}
	for _, tt := range tests {
		if got := settled(tt.p50s, 0.10); got != tt.want {
			t.Errorf("%s: settled = %v, want %v", tt.name, got, tt.want)
		}
	}
}
