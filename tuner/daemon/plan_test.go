package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// TestAPIPlan: GET .../plan answers what `batchtune plan --json` prints,
// and its errors say what is missing or which parameter is out of range.
func TestAPIPlan(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{})
	a.start()
	api := daemon.PathAPI + "/studies/s/plan"
	a.check(t, []apiCase{
		{"no recommendation yet", "GET", api + "?target_qps=1000", "", "", 404, `no recommendation yet`},
		{"no target", "GET", api, "", "", 400, `target_qps must be a rate`},
		{"target not a number", "GET", api + "?target_qps=lots", "", "", 400, `target_qps: not a number`},
		{"headroom over 1", "GET", api + "?target_qps=1000&headroom=1.5", "", "", 400, `headroom must be a share`},
		{"bad run", "GET", api + "?target_qps=1000&run=0", "", "", 400, `run:`},
		{"unknown study", "GET", daemon.PathAPI + "/studies/nope/plan?target_qps=1", "", "", 404, `unknown study`},
	})
	ctx := context.Background()
	if err := a.db.PutStudy(ctx, &store.Study{Name: "s", Spec: "name: s"}); err != nil {
		t.Fatal(err)
	}
	finish := func(rec *store.Recommendation) {
		run := &store.Run{Study: "s", Kind: store.KindOneShot, State: store.RunRunning, Started: time.Now()}
		if err := a.db.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		rec.Study, rec.Run, rec.Accepted = "s", run.ID, true
		run.State, run.Ended, run.Outcome = store.RunFinished, time.Now(), store.OutcomeRecommended
		if err := a.db.FinishRun(ctx, run, rec); err != nil {
			t.Fatal(err)
		}
	}
	// A max_throughput run: no capacity.
	finish(&store.Recommendation{Objective: 321.5})
	a.check(t, []apiCase{
		{"another objective", "GET", api + "?target_qps=1000", "", "", 409, `re-run the study with objective: max_capacity`},
	})
	finish(&store.Recommendation{Objective: 1000, Capacity: 1000, CapacityLow: 900, CapacityHigh: 1100, Confidence: 0.95,
		Baseline: "baseline (tf-defaults)", Capacities: []store.CapacityEstimate{{Label: "baseline (tf-defaults)", Capacity: 300, Low: 250, High: 350, Repeats: 2, Feasible: 2}}})
	// 100000 / (900 × 0.65) = 170.9 → 171; / (250 × 0.65) = 615.4 → 616.
	a.check(t, []apiCase{
		{"plan", "GET", api + "?target_qps=100000", "", "", 200, `"replicas": 171`},
		{"plan, baseline", "GET", api + "?target_qps=100000", "", "", 200, `"replicas": 616`},
		{"plan, saving", "GET", api + "?target_qps=100000", "", "", 200, `"saved": 445`},
		{"plan, headroom", "GET", api + "?target_qps=100000&headroom=1", "", "", 200, `"replicas": 112`},
		{"plan of run 1", "GET", api + "?target_qps=100000&run=1", "", "", 409, `max_capacity`},
	})
}
