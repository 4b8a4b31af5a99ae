package search

import (
	"math"
	"math/rand/v2"
	"testing"
)

// thompsonFixture fits a model to a smooth one-dimensional function on a
// few points and predicts it on a grid.
func thompsonFixture(t *testing.T, f func(float64) float64) (*gp, *posterior) {
	t.Helper()
	var x [][]float64
	var y []float64
	for _, v := range []float64{0.05, 0.3, 0.55, 0.8, 0.95} {
		x = append(x, []float64{v})
		y = append(y, f(v))
	}
	g, err := fitGP(t.Context(), x, y, 100, gpPrior{ls: lsPrior})
	if err != nil {
		t.Fatal(err)
	}
	var xs [][]float64
	for i := range 21 {
		xs = append(xs, []float64{float64(i) / 20})
	}
	return g, g.predict(xs)
}

// A joint draw has the posterior's mean and variance: checked over many
// draws at every candidate, in the model's original units.
func TestJointDrawMatchesThePosterior(t *testing.T) {
	g, p := thompsonFixture(t, func(v float64) float64 { return math.Sin(6 * v) })
	idx := make([]int, len(p.mu))
	for i := range idx {
		idx[i] = i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const draws = 4000
	sum := make([]float64, len(idx))
	sq := make([]float64, len(idx))
	for range draws {
		d := jointDraw(p, g, idx, rng)
		if d == nil {
			t.Fatal("no draw")
		}
		for a, v := range d {
			sum[a] += v
			sq[a] += v * v
		}
	}
	for a, j := range idx {
		mean := sum[a] / draws
		sd := math.Sqrt(math.Max(sq[a]/draws-mean*mean, 0))
		wantMean := p.mu[j]*g.std + g.mean
		wantSD := p.sd(j) * g.std
		if math.Abs(mean-wantMean) > 4*wantSD/math.Sqrt(draws)+1e-3 {
			t.Errorf("candidate %d: mean of draws %.4f, posterior mean %.4f", j, mean, wantMean)
		}
		if math.Abs(sd-wantSD) > 0.1*wantSD+1e-3 {
			t.Errorf("candidate %d: sd of draws %.4f, posterior sd %.4f", j, sd, wantSD)
		}
	}
}

// The draw's best is taken only among candidates whose drawn margin meets
// the constraint; a used candidate or one the acquisition rules out is
// never taken; and when no draw meets the constraint the least-over one
// is.
func TestThompsonPickRespectsTheConstraint(t *testing.T) {
	// Objective rising to the right; margin (log P99/SLO) under 0 only on
	// the left half, so the best feasible candidates are near the middle.
	fg, fp := thompsonFixture(t, func(v float64) float64 { return 3 * v })
	cg, cp := thompsonFixture(t, func(v float64) float64 { return 4 * (v - 0.5) })
	acq := make([]float64, len(fp.mu))
	used := make([]bool, len(fp.mu))
	used[9] = true
	acq[8] = math.Inf(-1)
	rng := rand.New(rand.NewPCG(3, 4))
	counts := map[int]int{}
	for range 300 {
		j := thompsonPick(acq, used, rng, fg, fp, cg, cp, false, nil, nil)
		if j < 0 {
			t.Fatal("no pick")
		}
		if j == 9 || j == 8 {
			t.Fatalf("picked candidate %d, which is used or ruled out", j)
		}
		counts[j]++
	}
	for j, c := range counts {
		if j > 12 { // x > 0.6: margin's mean 0.4 over, certainly infeasible
			t.Errorf("candidate %d (x=%.2f, over the SLO) picked %d times of 300", j, float64(j)/20, c)
		}
	}
	if counts[10]+counts[11]+counts[7] == 0 {
		t.Errorf("the best feasible region (x near 0.5) was never picked: %v", counts)
	}
	// Everything over the SLO: the least-over candidate, the leftmost.
	hg, hp := thompsonFixture(t, func(v float64) float64 { return 2 + 4*v })
	for i := range used {
		used[i] = false
	}
	acq[8] = 0
	if j := thompsonPick(acq, used, rng, fg, fp, hg, hp, false, nil, nil); j > 2 {
		t.Errorf("with every draw over the SLO picked candidate %d, want one of the least over (0..2)", j)
	}
}

// With Thompson 1 a suggestion after the design is a draw's pick: labelled
// so, unseen, the same for the same seed and history, and n picks of one
// call are distinct.
func TestBayesThompsonSuggests(t *testing.T) {
	s := conformanceSpace(t)
	hist := run(t, &Bayes{}, s, 7, 1, 12)
	seen := map[string]bool{}
	for _, tr := range hist {
		seen[tr.Config.Key()] = true
	}
	req := Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 7}
	a, err := (&Bayes{Thompson: 1}).Suggest(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&Bayes{Thompson: 1}).Suggest(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 1 || a[0].Reason != "thompson" {
		t.Fatalf("got %+v, want one suggestion labelled thompson", a)
	}
	if seen[a[0].Config.Key()] {
		t.Errorf("suggested %v, which the history already ran", a[0].Config)
	}
	if a[0].Config.Key() != b[0].Config.Key() {
		t.Errorf("the same seed and history suggested %v, then %v", a[0].Config, b[0].Config)
	}
	req.N = 3
	many, err := (&Bayes{Thompson: 1}).Suggest(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, sg := range many {
		keys[sg.Config.Key()] = true
	}
	if len(many) != 3 || len(keys) != 3 {
		t.Errorf("got %d suggestions, %d distinct, want 3 and 3", len(many), len(keys))
	}
}
