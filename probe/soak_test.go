package probe

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSoakShowsAStallInItsInterval: a server that stalls for 600 ms once,
// about 2.2 s into a 4 s soak at 100 req/s, shows it in the interval where
// the stalled requests completed, with their latency counted from the
// intended send time (so the requests due during the stall count at their
// full wait), while the intervals around it stay fast. The intervals are
// contiguous and together hold every success of the soak.
func TestSoakShowsAStallInItsInterval(t *testing.T) {
	var mu sync.Mutex
	var stallUntil time.Time
	f := &fakeServer{delay: func(n int64, now time.Time) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if n == 220 {
			stallUntil = now.Add(600 * time.Millisecond)
		}
		return stallUntil.Sub(now)
	}}
	c := newTestClient(t, startFake(t, f), nil)
	res, err := c.Soak(context.Background(), Load{Rate: 100}, &SoakOptions{Duration: 4 * time.Second, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Intervals) != 4 {
		t.Fatalf("%d intervals, want 4", len(res.Intervals))
	}
	var ok int64
	stalled := -1
	for i, iv := range res.Intervals {
		t.Logf("interval %d: sent %d ok %d P50 %s P99 %s", i, iv.Sent, iv.OK, iv.Latency.P50, iv.Quantile)
		if iv.Start != time.Duration(i)*time.Second || iv.Dur != time.Second {
			t.Errorf("interval %d spans %s+%s", i, iv.Start, iv.Dur)
		}
		ok += iv.OK
		if iv.Quantile >= 400*time.Millisecond {
			if stalled >= 0 {
				t.Errorf("intervals %d and %d both show the stall", stalled, i)
			}
			stalled = i
		} else if iv.Quantile > 200*time.Millisecond {
			t.Errorf("interval %d: P99 %s, neither fast nor the stall", i, iv.Quantile)
		}
	}
	if stalled != 2 {
		t.Errorf("the stall shows in interval %d, want 2 (2-3 s)", stalled)
	}
	if ok != res.Result.OK {
		t.Errorf("intervals hold %d successes, the soak %d", ok, res.Result.OK)
	}
	if res.Result.StopReason != StopSoakDone {
		t.Errorf("stop %s, want %s", res.Result.StopReason, StopSoakDone)
	}
}

// TestSoakOptions names each bad option.
func TestSoakOptions(t *testing.T) {
	c := &Client{}
	_, err := c.Soak(context.Background(), Load{Concurrency: 4}, &SoakOptions{Duration: 2 * time.Second, Interval: 1500 * time.Millisecond})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"load.rate", "interval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
