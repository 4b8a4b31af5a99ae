package report_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// TestMinLatencyStudy: for a study that minimises latency, smaller is
// better everywhere (best so far, winner), and objectives, stored in
// seconds, are shown in milliseconds.
func TestMinLatencyStudy(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	spec := strings.NewReplacer("objective: max_throughput", "objective: min_latency",
		"mode: closed", "mode: open\n  rate: 200", "  concurrency: 32\n", "").Replace(string(configs.DemoStudy))
	if _, err := configs.ParseStudy("s.yaml", []byte(spec)); err != nil {
		t.Fatalf("the test's spec: %v", err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "lat", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	run := &store.Run{Study: "lat", Kind: store.KindOneShot, Started: t0}
	if err := db.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	for i, p99 := range []time.Duration{40 * time.Millisecond, 25 * time.Millisecond, 30 * time.Millisecond} {
		obj := p99.Seconds()
		tr := &store.Trial{Study: "lat", Run: run.ID, Role: store.RoleSearch, State: store.TrialSucceeded, Feasible: true, Objective: &obj,
			Config:  []store.Param{{Name: "max_batch_size", Value: int64(4 << i)}},
			Summary: store.Summary{Throughput: 200, P99: p99, Requests: 800}}
		if err := db.AddTrial(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddRecommendation(ctx, &store.Recommendation{Study: "lat", Run: run.ID, Config: []store.Param{{Name: "max_batch_size", Value: 8}}, Objective: 0.025, Accepted: true}); err != nil {
		t.Fatal(err)
	}
	r, err := report.Build(ctx, db, "lat", 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Study.Maximize || r.Study.Objective != "min_latency" {
		t.Fatalf("facts = %+v, want min_latency, smaller is better", r.Study)
	}
	if best := r.Convergence[2].Best; best == nil || *best != 0.025 {
		t.Errorf("best after trial 3 = %v, want 0.025 (the smallest)", best)
	}
	if r.Winner != 2 {
		t.Errorf("winner = %d, want trial 2", r.Winner)
	}
	var b bytes.Buffer
	if err := report.WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "recommended: batch=8 (25.00ms)") {
		t.Errorf("text report:\n%s", b.String())
	}
	b.Reset()
	if err := report.WriteHTML(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "P99 latency (ms)") {
		t.Error("the plots' objective axis is not in milliseconds")
	}
}
