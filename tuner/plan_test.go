package tuner

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

func capacityRec() *store.Recommendation {
	return &store.Recommendation{
		Study: "s", Seq: 2, Run: 3, Confidence: 0.95, Baseline: "baseline (tf-defaults)",
		Objective: 1720, Capacity: 1720, CapacityLow: 1600, CapacityHigh: 1850,
		Capacities: []store.CapacityEstimate{
			{Label: "seed recipe", Capacity: 900, Low: 850, High: 950, Repeats: 3, Feasible: 3},
			{Label: "baseline (tf-defaults)", Capacity: 400, Low: 380, High: 420, Repeats: 3, Feasible: 3},
		},
	}
}

// TestPlanMath: replicas = ceil(target / (low × headroom)) per row, and the
// saving against the baseline (here TF's defaults).
func TestPlanMath(t *testing.T) {
	p, err := MakePlan(capacityRec(), 100_000, 0.65)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range p.Rows {
		got[r.Label] = r.Replicas
	}
	// 100000/(1600×0.65) = 96.15 → 97; /(850×0.65) = 180.99 → 181;
	// /(380×0.65) = 404.86 → 405.
	want := map[string]int{"recommended": 97, "seed recipe": 181, "baseline (tf-defaults)": 405}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("replicas (-want +got):\n%s", d)
	}
	if p.Saved == nil || *p.Saved != 405-97 || p.SavedVsDefaults == nil || *p.SavedVsDefaults != 308 {
		t.Errorf("saved %v, vs defaults %v; want 308 both", p.Saved, p.SavedVsDefaults)
	}
	if p.Rows[0].PerServer != 1600*0.65 {
		t.Errorf("per server %g, want the lower bound × headroom %g", p.Rows[0].PerServer, 1600*0.65)
	}
	text := p.Text()
	for _, s := range []string{"recommended", "97", "405", "tuning saves 308 of 405 servers (76%)"} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q:\n%s", s, text)
		}
	}
	// JSON round trip: what the API serves is what the CLI prints.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(*p, back); d != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", d)
	}
}

// TestPlanWithoutDefaults: a production baseline leaves TF's defaults
// unmeasured, said so; a baseline that met the SLO at no rate has no
// replica count and no saving is stated.
func TestPlanWithoutDefaults(t *testing.T) {
	rec := capacityRec()
	rec.Baseline = "baseline (production)"
	rec.Capacities = []store.CapacityEstimate{{Label: "baseline (production)", Capacity: 0, Repeats: 3}}
	p, err := MakePlan(rec, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	last := p.Rows[len(p.Rows)-1]
	if last.Role != "tf-defaults" || last.Replicas != 0 || !strings.Contains(last.Note, "baseline was production") {
		t.Errorf("defaults row %+v", last)
	}
	if p.Saved != nil || !strings.Contains(p.Text(), "no saving stated") {
		t.Errorf("saved %v with an infeasible baseline:\n%s", p.Saved, p.Text())
	}
	if p.Rows[1].Replicas != 0 || !strings.Contains(p.Rows[1].Note, "no rate") {
		t.Errorf("infeasible baseline row %+v", p.Rows[1])
	}
}

// TestPlanWideInterval: a row whose interval is too wide to plan on has
// no server count, and no saving is stated against it; the figures are
// the stand-in ranker's 30-trial run (experiments/capacity/results/
// ranker-capacity-30trials-2026-12-07.txt), where TF's defaults measured
// 210.7 and 108.9 req/s and were once planned as 67 216 servers.
func TestPlanWideInterval(t *testing.T) {
	rec := &store.Recommendation{
		Study: "s", Seq: 1, Run: 1, Confidence: 0.95, Baseline: labelDefaults,
		Capacity: 1196.1, CapacityLow: 1189.1, CapacityHigh: 1203.2,
		Capacities: []store.CapacityEstimate{
			{Label: "seed recipe", Capacity: 567.5, Low: 544.6, High: 591.3, Repeats: 2, Feasible: 2},
			{Label: labelDefaults, Capacity: 151.5, Low: 2.3, High: 10025.3, Repeats: 2, Feasible: 2},
		},
	}
	p, err := MakePlan(rec, 100_000, 0.65)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rows[0].Replicas != 130 || p.Rows[1].Replicas != 283 {
		t.Errorf("recommended %d, recipe %d servers; want 130 and 283", p.Rows[0].Replicas, p.Rows[1].Replicas)
	}
	def := p.Rows[2]
	if def.Role != "tf-defaults" || def.Replicas != 0 || def.PerServer != 0 || !strings.Contains(def.Note, "too wide") {
		t.Errorf("defaults row %+v, want no server count and why", def)
	}
	if p.Saved != nil || p.SavedVsDefaults != nil {
		t.Errorf("saved %v, vs defaults %v, against an interval too wide to plan on", p.Saved, p.SavedVsDefaults)
	}
	text := p.Text()
	for _, s := range []string{"no saving stated: the baseline has no server count", "[     2.3,  10025.3]", "too wide"} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "67216") {
		t.Errorf("text plans on the wide interval:\n%s", text)
	}

	// The recommendation's own interval too wide: no fleet is sized, and
	// no saving is stated though the baseline has a count.
	rec.CapacityLow, rec.CapacityHigh = 300, 4000
	rec.Capacities[1] = store.CapacityEstimate{Label: labelDefaults, Capacity: 109, Low: 108.6, High: 109.4, Repeats: 2, Feasible: 2}
	if p, err = MakePlan(rec, 100_000, 0.65); err != nil {
		t.Fatal(err)
	}
	if p.Rows[0].Replicas != 0 || p.Rows[2].Replicas != 1417 || p.Saved != nil || p.SavedVsDefaults != nil ||
		!strings.HasPrefix(p.Note, "no fleet is sized") || !strings.Contains(p.Text(), "the recommendation has no server count") {
		t.Errorf("wide recommendation: rows %+v, saved %v, note %q\n%s", p.Rows, p.Saved, p.Note, p.Text())
	}
}

// TestPlanErrors: inputs out of range name the flag; a recommendation of
// another objective says how to get a capacity.
func TestPlanErrors(t *testing.T) {
	for _, c := range []struct {
		target, headroom float64
		flag             string
	}{
		{0, 0.65, "--target-qps"},
		{-5, 0.65, "--target-qps"},
		{2e12, 0.65, "--target-qps"},
		{1000, 0, "--headroom"},
		{1000, 1.5, "--headroom"},
	} {
		err := CheckPlanInputs(c.target, c.headroom, "--target-qps", "--headroom")
		if !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("target %g headroom %g: %v, want ErrBadPlan naming %s", c.target, c.headroom, err, c.flag)
		}
	}
	rec := capacityRec()
	rec.Capacity, rec.CapacityLow, rec.CapacityHigh, rec.Capacities = 0, 0, 0, nil
	if _, err := MakePlan(rec, 1000, 0.65); !errors.Is(err, ErrNoCapacity) || !strings.Contains(err.Error(), "objective: max_capacity") {
		t.Errorf("no capacity: %v", err)
	}
}

// TestPlanRecommendation: a run's own, else the incumbent, else the
// latest; none at all is ErrNoRecommendation.
func TestPlanRecommendation(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	if err := db.PutStudy(ctx, &store.Study{Name: "s", Spec: "name: s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := PlanRecommendation(ctx, db, "s", 0); !errors.Is(err, ErrNoRecommendation) {
		t.Fatalf("empty study: %v", err)
	}
	for i, accepted := range []bool{true, false} {
		run := &store.Run{Study: "s", Kind: store.KindOneShot, State: store.RunRunning, Started: time.Now()}
		if err := db.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		rec := capacityRec()
		rec.Seq, rec.Run, rec.Accepted, rec.Capacity = 0, run.ID, accepted, float64(1000+i)
		run.State, run.Ended, run.Outcome = store.RunFinished, time.Now(), store.OutcomeRecommended
		if err := db.FinishRun(ctx, run, rec); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := PlanRecommendation(ctx, db, "s", 0)
	if err != nil || rec.Capacity != 1000 {
		t.Errorf("default: %+v, %v; want the incumbent (run 1)", rec, err)
	}
	if rec, err = PlanRecommendation(ctx, db, "s", 2); err != nil || rec.Capacity != 1001 {
		t.Errorf("run 2: %+v, %v", rec, err)
	}
	if _, err = PlanRecommendation(ctx, db, "s", 9); !errors.Is(err, ErrNoRecommendation) {
		t.Errorf("run 9: %v", err)
	}
}
