package tuner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// slowerSurface is testSurface after the model became slower at large
// batches: 10 ms more at max_batch_size >= 32, which pushes the incumbent
// (32, 9000) over the 30 ms SLO.
func slowerSurface(b configs.Batching) (float64, time.Duration) {
	q, p99 := testSurface(b)
	if b.MaxBatchSize >= 32 {
		p99 += 10 * time.Millisecond
	}
	return q, p99
}

func TestWarmStartKeepsThenChanges(t *testing.T) {
	dir := t.TempDir()
	export := filepath.Join(dir, "batching.config")
	s := testStudy(t, "export: {path: "+export+"}\nschedule: {trials: 4, accept_margin: 0.05, degradation_threshold: 0.1}\n")
	db := storetest.Open(t)
	ctx := context.Background()

	run := func(surface func(configs.Batching) (float64, time.Duration), warm bool) *Report {
		t.Helper()
		rt := &fakeRuntime{}
		tu := newTestTuner(t, s, db, rt, &fakeProber{rt: rt, surface: surface}, nil)
		ro := RunOptions{WarmStart: warm, Kind: store.KindScheduled}
		rep, err := tu.Run(ctx, ro)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	first := run(testSurface, true)
	if first.Recommendation == nil || !first.Recommendation.Accepted || first.Decision == nil || !first.Decision.Accepted {
		t.Fatalf("first run: recommendation %+v decision %+v", first.Recommendation, first.Decision)
	}
	incumbent := configOf(first.Recommendation.Config).Key()
	if err := os.Remove(export); err != nil {
		t.Fatal(err)
	}

	// Nothing changed: the incumbent is re-measured, kept, nothing exported,
	// in at most 10 trials.
	for i := 0; i < 2; i++ {
		rep := run(testSurface, true)
		d := rep.Decision
		if d == nil || !d.Kept || d.Accepted || d.Degraded {
			t.Fatalf("unchanged run %d: decision %+v", i, d)
		}
		if !strings.HasPrefix(d.Message, "incumbent kept") {
			t.Errorf("message %q", d.Message)
		}
		if n := len(rep.Trials); n > 10 {
			t.Errorf("unchanged run %d took %d trials, want <= 10", i, n)
		}
		if rep.Trials[0].Role != store.RoleIncumbent || configOf(rep.Trials[0].Config).Key() != incumbent {
			t.Errorf("run %d did not start with the incumbent: %+v", i, rep.Trials[0])
		}
		if rep.Run.Outcome != store.OutcomeKept {
			t.Errorf("outcome %s, want kept", rep.Run.Outcome)
		}
		if _, err := os.Stat(export); !os.IsNotExist(err) {
			t.Errorf("a kept run wrote the export: %v", err)
		}
		inc, err := db.Incumbent(ctx, s.Name)
		if err != nil || configOf(inc.Config).Key() != incumbent {
			t.Errorf("incumbent after a kept run = %+v, %v", inc, err)
		}
	}

	// The model became slower: the incumbent breaks the SLO, which is
	// flagged, and a configuration that meets it replaces it.
	rep := run(slowerSurface, true)
	d := rep.Decision
	if d == nil || !d.Accepted || !d.Degraded {
		t.Fatalf("changed run: decision %+v", d)
	}
	if rep.Run.Outcome != store.OutcomeRecommended || rep.Recommendation == nil || !rep.Recommendation.Accepted {
		t.Fatalf("changed run: outcome %s, recommendation %+v", rep.Run.Outcome, rep.Recommendation)
	}
	// The stored run keeps the alarm for whoever reads the store later.
	stored, err := db.Run(ctx, s.Name, rep.Run.ID)
	if err != nil || !stored.Degraded || stored.Degradation == nil || *stored.Degradation != d.Degradation {
		t.Errorf("stored run %+v, %v: want degraded with degradation %v", stored, err, d.Degradation)
	}
	data, err := os.ReadFile(export)
	if err != nil {
		t.Fatalf("no export after an accepted change: %v", err)
	}
	if string(data) != rep.Recommendation.Batching {
		t.Errorf("export %q is not the recommendation %q", data, rep.Recommendation.Batching)
	}
	b, _ := configs.DecodeBatching(data)
	if _, p99 := slowerSurface(configs.Resolve(b, 2)); p99 > 30*time.Millisecond {
		t.Errorf("the new recommendation breaks the SLO on the slower model: P99 %s", p99)
	}
	inc, err := db.Incumbent(ctx, s.Name)
	if err != nil || inc.Seq != rep.Recommendation.Seq {
		t.Errorf("incumbent = %+v, %v; want the new recommendation", inc, err)
	}
	recs, _ := db.Recommendations(ctx, s.Name)
	if len(recs) < 2 {
		t.Errorf("history holds %d recommendations, want every one", len(recs))
	}
}
