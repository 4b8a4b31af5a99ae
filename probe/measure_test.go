package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fixed makes a run last exactly d (no statistical stop).
func fixed(d time.Duration) *MeasureOptions {
	return &MeasureOptions{MinDuration: d, MaxDuration: d}
}

// stallAt returns a delay function that holds every request arriving in
// [from, from+d) until from+d, and answers others after base.
func stallAt(from time.Time, d, base time.Duration) func(int64, time.Time) time.Duration {
	return func(_ int64, now time.Time) time.Duration {
		if !now.Before(from) && now.Before(from.Add(d)) {
			return from.Add(d).Sub(now)
		}
		return base
	}
}

// A 500 ms stall in the middle of an open-loop run, with the in-flight
// requests bounded at 4 the way a client with a few connections is: the
// stall shows in the corrected P99 (latency from the intended send), while
// the service time (from the actual send, what ghz or perf_analyzer
// report) hides it because only 4 requests were in flight during it.
func TestStallShowsInCorrectedLatency(t *testing.T) {
	f := &fakeServer{}
	c := newTestClient(t, startFake(t, f), nil)
	start := time.Now()
	f.delay = stallAt(start.Add(1500*time.Millisecond), 500*time.Millisecond, 0)
	r, err := c.Measure(context.Background(), Load{Rate: 200, MaxWorkers: 4}, fixed(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + Summary(r))
	// ~100 of ~800 requests were due during the stall and waited up to
	// 500 ms: far more than 1%, so the corrected P99 is near 500 ms.
	if r.Latency.P99 < 300*time.Millisecond {
		t.Errorf("corrected P99 %s does not show the 500ms stall", r.Latency.P99)
	}
	// Only the 4 requests in flight saw the stall as service time: 0.5%.
	if r.ServiceTime.P99 > r.Latency.P99/5 {
		t.Errorf("service-time P99 %s should hide the stall (corrected %s)", r.ServiceTime.P99, r.Latency.P99)
	}
	if r.ServiceTime.Max < 300*time.Millisecond {
		t.Errorf("service-time max %s: the stalled requests themselves are missing", r.ServiceTime.Max)
	}
	// The bound was hit, and the result says the rate was not kept.
	if r.RateKept || r.Generator.BoundWaits == 0 || !strings.Contains(r.RateNote, "all 4") {
		t.Errorf("RateKept=%v BoundWaits=%d note %q", r.RateKept, r.Generator.BoundWaits, r.RateNote)
	}
}

// The same stall with the default worker bound: workers are added while
// requests are stuck, so the offered rate is kept through the stall.
func TestOpenLoopKeepsRateThroughStall(t *testing.T) {
	f := &fakeServer{}
	c := newTestClient(t, startFake(t, f), nil)
	f.delay = stallAt(time.Now().Add(1500*time.Millisecond), 500*time.Millisecond, 0)
	// The fake server runs in this process: the 100 answers released at
	// once by the stall cost it ~20 ms of CPU, which delays a few sends
	// past the default 10 ms lag limit. That is the guard working; here it
	// is loosened so the test looks at the rate.
	o := fixed(4 * time.Second)
	o.MaxPacingLag = 100 * time.Millisecond
	r, err := c.Measure(context.Background(), Load{Rate: 200}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + Summary(r))
	if !r.RateKept || r.SentRate < 0.99*200 || r.SentRate > 1.01*200 {
		t.Errorf("rate: kept=%v sent %.1f/s of 200 (%s)", r.RateKept, r.SentRate, r.RateNote)
	}
	// 0.5 s × 200/s = 100 requests were stuck at once at the end of the stall.
	if r.Generator.PeakWorkers < 60 {
		t.Errorf("peak workers %d: the pool did not grow through the stall", r.Generator.PeakWorkers)
	}
	// Sent on time, the stalled requests are slow in both measures.
	if r.Latency.P99 < 300*time.Millisecond || r.ServiceTime.P99 < 300*time.Millisecond {
		t.Errorf("P99 corrected %s, service %s: want both to show the stall", r.Latency.P99, r.ServiceTime.P99)
	}
	if !r.Valid {
		t.Errorf("invalid: %s", r.InvalidReason)
	}
}

// A steady server stops as stable well before MaxDuration; a server whose
// latency changes regime every other second cannot satisfy the P99 rule
// and runs to MaxDuration. Tolerances are loose because this machine is
// shared and noisy; the contrast is what is tested.
func TestStoppingRule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two measurements of up to 30 s")
	}
	const limit = 30 * time.Second
	opts := func() *MeasureOptions {
		return &MeasureOptions{MinDuration: 3 * time.Second, MaxDuration: limit, ThroughputTolerance: 0.10, P99Tolerance: 0.25}
	}
	steady := &fakeServer{delay: func(int64, time.Time) time.Duration { return 2 * time.Millisecond }}
	c := newTestClient(t, startFake(t, steady), nil)
	r, err := c.Measure(context.Background(), Load{Concurrency: 4}, opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("steady:\n" + Summary(r))
	if r.StopReason != StopStable || r.Duration >= limit {
		t.Errorf("steady run: stop %q after %s, want stable before %s", r.StopReason, r.Duration, limit)
	}

	start := time.Now()
	noisy := &fakeServer{delay: func(_ int64, now time.Time) time.Duration {
		if int(now.Sub(start).Seconds())%2 == 0 {
			return time.Millisecond
		}
		return 8 * time.Millisecond
	}}
	c2 := newTestClient(t, startFake(t, noisy), nil)
	r2, err := c2.Measure(context.Background(), Load{Concurrency: 4}, opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("noisy:\n" + Summary(r2))
	if r2.StopReason != StopMaxDuration || r2.Stability.Stable {
		t.Errorf("noisy run: stop %q, stable %v, want max-duration and unstable", r2.StopReason, r2.Stability.Stable)
	}
	if r2.Duration <= r.Duration {
		t.Errorf("noisy run (%s) did not run longer than the steady one (%s)", r2.Duration, r.Duration)
	}
}

// A server far over the SLO is stopped at once, in both loop kinds, and
// an error budget likewise.
func TestEarlyStopOnCertainBreach(t *testing.T) {
	slow := &fakeServer{delay: func(int64, time.Time) time.Duration { return 30 * time.Millisecond }}
	c := newTestClient(t, startFake(t, slow), nil)
	slo := &SLO{Latency: 5 * time.Millisecond, ErrorRate: 0.01}
	for _, load := range []Load{{Concurrency: 4}, {Rate: 100}} {
		// The lag guard is loosened: this test is about the stop, and the
		// race detector on a shared machine lags sends by tens of ms.
		r, err := c.Measure(context.Background(), load, &MeasureOptions{MinDuration: 10 * time.Second, MaxDuration: 30 * time.Second, SLO: slo, MaxPacingLag: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if r.StopReason != StopSLOBreach || r.Duration > 2*time.Second {
			t.Errorf("%s: stop %q after %s, want slo-breach within 2s (%s)", load, r.StopReason, r.Duration, r.StopDetail)
		}
		if !r.Valid {
			t.Errorf("%s: an early-stopped run is still a valid measurement: %s", load, r.InvalidReason)
		}
	}

	failing := &fakeServer{err: func(int64) error { return status.Error(codes.Unavailable, "queue full") }}
	c2 := newTestClient(t, startFake(t, failing), nil)
	r, err := c2.Measure(context.Background(), Load{Concurrency: 2}, &MeasureOptions{MinDuration: 10 * time.Second, MaxDuration: 30 * time.Second, SLO: slo})
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != StopErrorBudget || r.Duration > 2*time.Second || r.Errors["Unavailable"] == 0 || r.ErrorRate != 1 {
		t.Errorf("failing server: stop %q after %s, errors %v rate %g", r.StopReason, r.Duration, r.Errors, r.ErrorRate)
	}
}

// A closed-loop run whose throughput is certainly below StopBelow stops
// as dominated once it has MinWindows windows, long before MinDuration,
// with valid figures; one certainly above it runs its course; an open loop
// cannot take a bar.
func TestStopBelowDominated(t *testing.T) {
	srv := &fakeServer{delay: func(int64, time.Time) time.Duration { return 2 * time.Millisecond }}
	c := newTestClient(t, startFake(t, srv), nil)
	// Four requests in flight at 2 ms each serve at most 2 000 req/s.
	r, err := c.Measure(context.Background(), Load{Concurrency: 4}, &MeasureOptions{MinDuration: 20 * time.Second, MaxDuration: 30 * time.Second, StopBelow: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != StopDominated || r.Duration > 10*time.Second || r.Stability.Windows < 3 {
		t.Errorf("bar 1e6: stop %q after %s and %d windows, want dominated after 3 windows and well before 20 s (%s)",
			r.StopReason, r.Duration, r.Stability.Windows, r.StopDetail)
	}
	if !r.Valid || r.QPS <= 0 {
		t.Errorf("a dominated run is a valid measurement: valid %v (%s), %g req/s", r.Valid, r.InvalidReason, r.QPS)
	}

	r, err = c.Measure(context.Background(), Load{Concurrency: 4}, &MeasureOptions{MinDuration: 3 * time.Second, MaxDuration: 3 * time.Second, StopBelow: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason == StopDominated {
		t.Errorf("bar 1 req/s: stopped as dominated at %g req/s (%s)", r.QPS, r.StopDetail)
	}

	_, err = c.Measure(context.Background(), Load{Rate: 100}, &MeasureOptions{StopBelow: 50})
	if !errors.Is(err, ErrBadOptions) || !strings.Contains(fmt.Sprint(err), "stop_below") {
		t.Errorf("open loop with a bar: err %v, want ErrBadOptions naming stop_below", err)
	}
}

// The CPU guard measures this process's own CPU time; with an absurdly
// low limit any run is marked invalid, with the figures as evidence.
func TestCPUGuardMarksInvalid(t *testing.T) {
	c := newTestClient(t, startFake(t, &fakeServer{}), nil)
	o := fixed(time.Second)
	o.MaxCPU = 0.0001
	r, err := c.Measure(context.Background(), Load{Concurrency: 2}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || !strings.Contains(r.InvalidReason, "generator CPU saturated") || r.Generator.CPU <= 0 || r.Generator.CPUPerRequest <= 0 {
		t.Errorf("valid=%v reason %q, generator %+v", r.Valid, r.InvalidReason, r.Generator)
	}
}

// Cancelling the context (as the tuner does when the server dies) ends
// Measure promptly, even with every request stuck, with a partial invalid
// result and the cause.
func TestMeasureCancel(t *testing.T) {
	hang := &fakeServer{delay: func(int64, time.Time) time.Duration { return time.Hour }}
	c := newTestClient(t, startFake(t, hang), nil)
	cause := errors.New("server process exited with status 1")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(300*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	r, err := c.Measure(ctx, Load{Concurrency: 8}, fixed(30*time.Second))
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Measure took %s after cancel", took)
	}
	if !errors.Is(err, cause) {
		t.Errorf("err = %v, want the cause", err)
	}
	if r == nil || r.Valid || r.StopReason != StopCancelled || r.Unfinished != 8 {
		t.Fatalf("result %+v", r)
	}
	// The 8 stuck requests are in the latency at a lower bound of ~300ms.
	if r.Latency.Max < 250*time.Millisecond {
		t.Errorf("unfinished requests missing from latency: max %s", r.Latency.Max)
	}
}

func TestBadOptions(t *testing.T) {
	c := newTestClient(t, startFake(t, &fakeServer{}), nil)
	tests := []struct {
		name string
		load Load
		o    *MeasureOptions
		want []string // every field named
	}{
		// Both loop kinds at once, and a bad window.
		{"both loads", Load{Concurrency: 2, Rate: 10}, &MeasureOptions{Window: 1500 * time.Millisecond}, []string{"load:", "window:"}},
		// No load at all.
		{"no load", Load{}, nil, []string{"load:"}},
		// Min over max and a bad tolerance and quantile, all reported together.
		{"several", Load{Concurrency: 1}, &MeasureOptions{MinDuration: 10 * time.Second, MaxDuration: 5 * time.Second, P99Tolerance: 2, SLO: &SLO{Quantile: 7}},
			[]string{"min_duration:", "p99_tolerance:", "slo.quantile:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Measure(context.Background(), tt.load, tt.o)
			if !errors.Is(err, ErrBadOptions) {
				t.Fatalf("err = %v, want ErrBadOptions", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// Warmup waits out a cold start: the fake's latency decays from ~30 ms
// towards 0.5 ms over its first ~150 requests (about 1.2 s of work), as
// first inferences do.
func TestWarmupSettles(t *testing.T) {
	f := &fakeServer{delay: func(n int64, _ time.Time) time.Duration {
		return 500*time.Microsecond + time.Duration(30e6*math.Exp(-float64(n)/40))
	}}
	c := newTestClient(t, startFake(t, f), nil)
	w, err := c.Warmup(context.Background(), Load{Concurrency: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Settled || w.StopReason != StopWarmedUp || w.Requests < 150 {
		t.Fatalf("warmup %+v", w)
	}
	if first, last := w.Medians[0], w.Medians[len(w.Medians)-1]; first < 3*last {
		t.Errorf("medians %v: the cold start should show at the start", w.Medians)
	}
	// Every request of the measurement, and none of the warmup's, is in
	// its figures: the server's count rises by exactly what Measure reports.
	before := f.calls.Load()
	r, err := c.Measure(context.Background(), Load{Concurrency: 2}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if served := f.calls.Load() - before; served != r.Requests || r.Requests != r.Latency.Count {
		t.Errorf("server served %d, result counts %d requests and %d latencies", served, r.Requests, r.Latency.Count)
	}

	// Count mode: exactly the requests asked for (at least), no settling.
	w2, err := c.Warmup(context.Background(), Load{Concurrency: 2}, &WarmupOptions{Requests: 50})
	if err != nil {
		t.Fatal(err)
	}
	if w2.StopReason != StopWarmupCount || w2.Requests < 50 {
		t.Errorf("count warmup %+v", w2)
	}
}

func TestWarmupRejectsBadPayload(t *testing.T) {
	f := &fakeServer{err: func(int64) error {
		return status.Error(codes.InvalidArgument, "input tensor alias not found in signature: x")
	}}
	c := newTestClient(t, startFake(t, f), nil)
	_, err := c.Warmup(context.Background(), Load{Concurrency: 1}, nil)
	if !errors.Is(err, ErrRequestsFail) || !strings.Contains(err.Error(), "alias not found") {
		t.Fatalf("err = %v, want ErrRequestsFail with the server's words", err)
	}
}

func TestResultJSON(t *testing.T) {
	c := newTestClient(t, startFake(t, &fakeServer{}), nil)
	r, err := c.Measure(context.Background(), Load{Rate: 100}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.OK != r.OK || back.Latency != r.Latency || back.StopReason != r.StopReason || len(back.Series) != len(r.Series) {
		t.Errorf("JSON round trip lost data:\n%s", b)
	}
	// The series adds up to the requests.
	var ok int64
	for _, s := range r.Series {
		ok += s.OK
	}
	if ok != r.OK {
		t.Errorf("series holds %d ok, result %d", ok, r.OK)
	}
}

// A server that hangs while the worker bound is reached: every request due
// by the stop is accounted for, the 2 in flight and the ~98 never sent, as
// unfinished with their waits as lower bounds; none silently vanishes.
func TestHungServerAtBound(t *testing.T) {
	hang := &fakeServer{delay: func(int64, time.Time) time.Duration { return time.Hour }}
	c := newTestClient(t, startFake(t, hang), nil)
	o := fixed(time.Second)
	o.DrainTimeout = 200 * time.Millisecond
	r, err := c.Measure(context.Background(), Load{Rate: 100, MaxWorkers: 2}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Unfinished < 95 || r.Unfinished > 102 || r.OK != 0 || r.RateKept {
		t.Errorf("unfinished %d (want ~100), ok %d, rate kept %v", r.Unfinished, r.OK, r.RateKept)
	}
	// The first request waited the whole second plus the drain.
	if r.Latency.Max < 900*time.Millisecond || r.Latency.Count != r.Unfinished {
		t.Errorf("latency max %s over %d values", r.Latency.Max, r.Latency.Count)
	}
}

func TestMeasureDefaults(t *testing.T) {
	tests := []struct {
		name string
		o    *MeasureOptions
		lag  time.Duration
	}{
		// No options: the documented defaults.
		{"nil", nil, 10 * time.Millisecond},
		// A 300 ms SLO tolerates a tenth of it as pacing lag.
		{"slo 300ms", &MeasureOptions{SLO: &SLO{Latency: 300 * time.Millisecond}}, 30 * time.Millisecond},
		// A tight SLO does not make the guard stricter than 10 ms.
		{"slo 20ms", &MeasureOptions{SLO: &SLO{Latency: 20 * time.Millisecond}}, 10 * time.Millisecond},
		// An explicit limit wins.
		{"explicit", &MeasureOptions{MaxPacingLag: time.Millisecond, SLO: &SLO{Latency: time.Second}}, time.Millisecond},
	}
	for _, tt := range tests {
		m := tt.o.withDefaults()
		if m.MaxPacingLag != tt.lag || m.MinDuration != 5*time.Second || m.MaxDuration != time.Minute || m.MaxCPU != 0.9 {
			t.Errorf("%s: %+v, want lag %s", tt.name, m, tt.lag)
		}
	}
}
