package tuner

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// TestDegradationIsJudgedWithAnInterval: a warm start whose first
// re-measure of the incumbent comes out 20% low, once, measures it again
// and does not flag it; one whose incumbent really lost 25% is flagged,
// with the loss's interval in the message.
func TestDegradationIsJudgedWithAnInterval(t *testing.T) {
	s := testStudy(t, "schedule: {trials: 2, accept_margin: 0.05, degradation_threshold: 0.1}\n")
	db := storetest.Open(t)
	ctx := context.Background()
	run := func(surface func(configs.Batching) (float64, time.Duration)) *Report {
		t.Helper()
		rt := &fakeRuntime{}
		rep, err := newTestTuner(t, s, db, rt, &fakeProber{rt: rt, surface: surface}, nil).Run(ctx, RunOptions{WarmStart: true, Kind: store.KindScheduled})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := run(testSurface)
	if first.Recommendation == nil || !first.Recommendation.Accepted {
		t.Fatalf("first run: %+v", first.Recommendation)
	}
	inc := configOf(first.Recommendation.Config).Key()
	isInc := func(b configs.Batching) bool { return configOfBatching(b) == inc }
	// scaled measures the incumbent at factor(n) of its figure on its nth
	// measurement, everything else as before.
	scaled := func(factor func(n int) float64) func(configs.Batching) (float64, time.Duration) {
		var mu sync.Mutex
		n := 0
		return func(b configs.Batching) (float64, time.Duration) {
			q, p99 := testSurface(b)
			if isInc(b) {
				mu.Lock()
				n++
				q *= factor(n)
				mu.Unlock()
			}
			return q, p99
		}
	}
	incumbentTrials := func(rep *Report) int {
		n := 0
		for _, tr := range rep.Trials {
			if tr.Role == store.RoleIncumbent {
				n++
			}
		}
		return n
	}

	// One noisy re-measure: 20% low once, then within 1%.
	noisy := run(scaled(func(n int) float64 {
		if n == 1 {
			return 0.8
		}
		return 1 + 0.01*float64(n%2)
	}))
	if d := noisy.Decision; d == nil || d.Degraded {
		t.Errorf("one noisy re-measure: decision %+v, want not degraded", d)
	}
	if n := incumbentTrials(noisy); n < s.Confirmation.Repeats {
		t.Errorf("the incumbent was measured %d times after a 20%% drop, want at least %d", n, s.Confirmation.Repeats)
	}
	if stored, _ := db.Run(ctx, s.Name, noisy.Run.ID); stored.Degraded {
		t.Errorf("the stored run says degraded: %+v", stored)
	}

	// A real loss: 25% low every time.
	slower := run(scaled(func(n int) float64 { return 0.75 * (1 + 0.01*float64(n%2)) }))
	d := slower.Decision
	if d == nil || !d.Degraded || d.Degradation < 0.2 || d.Degradation > 0.3 {
		t.Fatalf("a 25%% loss: decision %+v, want degraded by about 0.25", d)
	}
	if !strings.Contains(d.Message, "loss interval") {
		t.Errorf("message %q does not give the loss's interval", d.Message)
	}
}

// configOfBatching is the key of a batching config's searched parameters.
func configOfBatching(b configs.Batching) string {
	return configOf([]store.Param{{Name: "max_batch_size", Value: b.MaxBatchSize}, {Name: "batch_timeout_micros", Value: b.BatchTimeoutMicros}}).Key()
}
