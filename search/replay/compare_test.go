package replay

import (
	"math"
	"testing"

	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

// Reference values from the normal approximation with continuity
// correction (as scipy.stats.mannwhitneyu(..., method="asymptotic")
// computes it): two fully separated samples of 10 give p = 0.000183;
// identical samples give p = 1; a sample against itself shifted by half
// its spread lands in between.
func TestMannWhitney(t *testing.T) {
	seq := func(from, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(from + i)
		}
		return out
	}
	p, shift := MannWhitney(seq(11, 10), seq(1, 10))
	if math.Abs(p-0.000183) > 0.000005 || !(shift > 0) {
		t.Errorf("separated samples: p %.6f shift %g, want p 0.000183 and a positive shift (a larger)", p, shift)
	}
	if p2, shift2 := MannWhitney(seq(1, 10), seq(11, 10)); p2 != p || shift2 != -shift {
		t.Errorf("swapped: p %g shift %g, want p %g shift %g", p2, shift2, p, -shift)
	}
	if p, _ := MannWhitney(seq(1, 10), seq(1, 10)); p != 1 {
		t.Errorf("identical samples: p %g, want 1", p)
	}
	if p, _ := MannWhitney([]float64{5, 5, 5}, []float64{5, 5}); p != 1 {
		t.Errorf("all tied: p %g, want 1", p)
	}
	// Shifted by 5 of 10: a's U = 87.5 of 100 pairs (the five shared
	// values count half), mean 50; five pairs of ties make the sd
	// sqrt(100/12 × (21 − 30/380)) = 13.20, z = (37.5 − 0.5) / 13.20 =
	// 2.80, p = 0.0051.
	if p, _ := MannWhitney(seq(6, 10), seq(1, 10)); math.Abs(p-0.0051) > 0.0001 {
		t.Errorf("half-shifted samples: p %.4f, want 0.0051", p)
	}
}

// A setting that reaches the target in fewer trials on most seeds wins;
// one whose seeds interleave with the other's does not, and an unreached
// seed counts as worse than any reached one.
func TestCompareReach(t *testing.T) {
	runs := func(reach ...int) []Run {
		out := make([]Run, len(reach))
		for i, r := range reach {
			out[i] = Run{Reach: []int{r}}
		}
		return out
	}
	var slow, fast, mixed []int
	for i := range 30 {
		slow = append(slow, 20+i%10)
		fast = append(fast, 5+i%10)
		mixed = append(mixed, 19+i%12)
	}
	if v := CompareReach(runs(slow...), runs(fast...), 0, 100); v.Sign != 1 || v.OldMedian != 24 || v.NewMedian != 9 {
		t.Errorf("slow -> fast: %+v, want won, medians 24 and 9", v)
	}
	if v := CompareReach(runs(fast...), runs(slow...), 0, 100); v.Sign != -1 {
		t.Errorf("fast -> slow: %+v, want lost", v)
	}
	if v := CompareReach(runs(slow...), runs(mixed...), 0, 100); v.Sign != 0 || !(v.P > Alpha) {
		t.Errorf("slow -> interleaved: %+v, want not significant", v)
	}
	never := make([]int, 30) // 0: never reached
	if v := CompareReach(runs(slow...), runs(never...), 0, 100); v.Sign != -1 || !math.IsInf(v.NewMedian, 1) {
		t.Errorf("slow -> never: %+v, want lost with an unreached median", v)
	}
}

// A pick is worth its truth's share of the best, none when it is truly
// infeasible or missing, on either objective's scale; ComparePicks calls
// better picks won.
func TestComparePicks(t *testing.T) {
	c := search.Config{{Name: search.MaxBatchSize, Value: 8}}
	for _, tc := range []struct {
		r    Run
		d    objective.Direction
		want float64
	}{
		{Run{Pick: c, PickTruth: Truth{Feasible: true, Value: 900}}, objective.Maximize, 0.9},
		{Run{Pick: c, PickTruth: Truth{Feasible: true, Value: 1250}}, objective.Minimize, 0.8},
		{Run{Pick: c, PickTruth: Truth{Feasible: false, Value: 1000}}, objective.Maximize, 0},
		{Run{}, objective.Maximize, 0},
	} {
		if got := PickShare(tc.r, tc.d, 1000); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("PickShare(%+v, %v) = %v, want %v", tc.r, tc.d, got, tc.want)
		}
	}
	var worse, better []float64
	for i := range 30 {
		worse = append(worse, 0.80+0.005*float64(i%10))
		better = append(better, 0.95+0.005*float64(i%10))
	}
	if v := ComparePicks(worse, better); v.Sign != 1 || math.Abs(v.OldMedian-0.82) > 1e-9 || math.Abs(v.NewMedian-0.97) > 1e-9 {
		t.Errorf("worse -> better picks: %+v, want won, medians 0.82 and 0.97", v)
	}
	if v := ComparePicks(better, worse); v.Sign != -1 {
		t.Errorf("better -> worse picks: %+v, want lost", v)
	}
	if v := ComparePicks(better, better); v.Sign != 0 {
		t.Errorf("the same picks: %+v, want not significant", v)
	}
}

// TestHolm checks Holm's step-down adjustment against values worked by
// hand: p-values 0.01, 0.04, 0.03, 0.5 of four comparisons sort to 0.01,
// 0.03, 0.04, 0.5 and adjust to 4×0.01, 3×0.03, max(0.09, 2×0.04),
// max(0.09, 1×0.5), each returned at its own place.
func TestHolm(t *testing.T) {
	got := Holm([]float64{0.01, 0.04, 0.03, 0.5})
	want := []float64{0.04, 0.09, 0.09, 0.5}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
	// Capped at 1, and monotone in the sorted order even where a larger
	// multiplier meets a smaller p.
	got = Holm([]float64{0.6, 0.2, 0.3})
	want = []float64{0.6, 0.6, 0.6}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
	if got := Holm(nil); len(got) != 0 {
		t.Fatalf("Holm(nil) = %v, want empty", got)
	}
}
