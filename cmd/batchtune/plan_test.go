package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// TestPlanCommand: flags out of range are usage errors naming the flag; a
// study with no recommendation, or one of another objective, says what
// to do; a capacity recommendation gives replicas, as text and JSON.
func TestPlanCommand(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "b.db")
	db, err := store.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "s", SpecHash: "h"}); err != nil {
		t.Fatal(err)
	}
	finish := func(rec *store.Recommendation) {
		run := &store.Run{Study: "s", Kind: store.KindOneShot, SpecHash: "h", State: store.RunRunning, Started: time.Now()}
		if err := db.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			return
		}
		rec.Study, rec.Run, rec.Accepted = "s", run.ID, true
		run.State, run.Ended, run.Outcome = store.RunFinished, time.Now(), store.OutcomeRecommended
		if err := db.FinishRun(ctx, run, rec); err != nil {
			t.Fatal(err)
		}
	}
	finish(nil)
	db.Close()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan", "--db", dbPath}, exitUsage, "--target-qps must be a rate"},
		{[]string{"plan", "--db", dbPath, "--target-qps", "1000", "--headroom", "2"}, exitUsage, "--headroom must be a share"},
		{[]string{"plan", "--db", dbPath, "--target-qps", "1000"}, exitError, "study s has no recommendation yet"},
	} {
		if _, errw, code := batchtune(t, c.args...); code != c.code || !strings.Contains(errw, c.want) {
			t.Errorf("%v: exit %d %q, want %d with %q", c.args, code, errw, c.code, c.want)
		}
	}
	db, err = store.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	finish(&store.Recommendation{Objective: 321.5})
	db.Close()
	if _, errw, code := batchtune(t, "plan", "--db", dbPath, "--target-qps", "1000"); code != exitError || !strings.Contains(errw, "objective: max_capacity") {
		t.Errorf("another objective: exit %d %q", code, errw)
	}
	db, err = store.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	finish(&store.Recommendation{Objective: 1000, Capacity: 1000, CapacityLow: 900, CapacityHigh: 1100, Confidence: 0.95, Baseline: "baseline (tf-defaults)",
		Capacities: []store.CapacityEstimate{{Label: "baseline (tf-defaults)", Capacity: 300, Low: 250, High: 350, Repeats: 2, Feasible: 2}}})
	db.Close()
	out, errw, code := batchtune(t, "plan", "--db", dbPath, "--target-qps", "100000")
	if code != 0 || !strings.Contains(out, "171") || !strings.Contains(out, "616") || !strings.Contains(out, "tuning saves 445 of 616 servers") {
		t.Errorf("plan: exit %d\n%s%s", code, out, errw)
	}
	out, _, code = batchtune(t, "plan", "--db", dbPath, "--target-qps", "100000", "--json")
	var p tuner.Plan
	if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil || p.Rows[0].Replicas != 171 || p.Saved == nil || *p.Saved != 445 {
		t.Errorf("plan --json: exit %d %v\n%s", code, err, out)
	}
}
