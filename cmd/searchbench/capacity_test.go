package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestRunOnCapacityAndOldSurfaces: one run over a max_capacity surface
// (format 2) and a format 1 surface, both committed test files: each gets
// its table, the capacity one in req/s of capacity, and every strategy
// reaches the capacity surface's best.
func TestRunOnCapacityAndOldSurfaces(t *testing.T) {
	capSurface := "../../search/replay/testdata/capacity.jsonl"
	v1 := "../../search/replay/testdata/v1.jsonl"
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-seeds", "4", "-strategies", "random,hillclimb,bayes", capSurface, v1}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	got := out.String()
	for _, want := range []string{"surface tiny-capacity: max_capacity", "best capacity (req/s) 390.0", "surface tiny-v1: max_throughput"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	out.Reset()
	if code := run(t.Context(), []string{"-seeds", "4", "-json", "-strategies", "random,hillclimb,bayes", capSurface}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	var reps []struct {
		Objective string  `json:"objective"`
		BestValue float64 `json:"best_value"`
		Rows      []struct {
			Strategy string `json:"strategy"`
			Reached  []int  `json:"reached"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &reps); err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Objective != "max_capacity" || reps[0].BestValue != 390 || len(reps[0].Rows) != 3 {
		t.Fatalf("reports %+v", reps)
	}
	for _, r := range reps[0].Rows {
		// Two runnable configurations: every seed runs the best one.
		if r.Reached[0] != 4 || r.Reached[1] != 4 {
			t.Errorf("%s reached the targets in %v of 4 seeds", r.Strategy, r.Reached)
		}
	}
}
