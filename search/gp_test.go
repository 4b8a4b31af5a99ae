package search

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMarginalGradient checks the analytic gradient of the negative log
// marginal likelihood against central finite differences.
func TestMarginalGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 25
	x := make([][]float64, n)
	y := make([]float64, n)
	for i := range x {
		x[i] = []float64{r.Float64(), r.Float64(), r.Float64()}
		y[i] = math.Sin(3*x[i][0]) + 0.5*x[i][1] + 0.05*r.NormFloat64()
	}
	for _, c := range []struct{ trend, warp, additive bool }{
		{false, false, false}, {true, false, false}, {false, true, false}, {true, true, false},
		{false, false, true}, {true, false, true}, {false, true, true}, {true, true, true},
	} {
		trend := c.trend
		ml := newMarginal(x, y, c.trend, c.warp, c.additive)
		ml.ls = lsPrior
		for _, theta := range [][]float64{
			{math.Log(0.3), math.Log(0.8), math.Log(2), 0.1, math.Log(0.01)},
			{math.Log(1.5), math.Log(0.1), math.Log(0.5), -0.5, math.Log(0.2)},
		} {
			if trend {
				theta = append(theta, math.Log(0.4)) // log sl2
			}
			if c.additive {
				theta = append(theta, math.Log(0.7)) // log sa2
			}
			if c.warp { // log a, log b per dimension, away from the identity
				theta = append(theta, 0.3, -0.2, -0.5, 0.4, 0.1, 0.6)
			}
			if f := ml.value(theta); math.IsNaN(f) || math.IsInf(f, 0) || f >= 1e10 {
				t.Fatalf("trend %v, warp %v, additive %v, θ=%v: the objective is %v", trend, c.warp, c.additive, theta, f)
			}
			grad := make([]float64, len(theta))
			ml.grad(grad, theta)
			for k := range theta {
				const h = 1e-5
				up, down := append([]float64(nil), theta...), append([]float64(nil), theta...)
				up[k] += h
				down[k] -= h
				num := (ml.value(up) - ml.value(down)) / (2 * h)
				// Written so that a NaN on either side fails too.
				if !(math.Abs(num-grad[k]) <= 1e-4*math.Max(1, math.Abs(num))) {
					t.Errorf("trend %v, warp %v, additive %v, θ=%v: ∂/∂θ[%d] analytic %.6g, numeric %.6g", trend, c.warp, c.additive, theta, k, grad[k], num)
				}
			}
		}
	}
}

// TestGPTrendExtrapolates: trained on a rising line over the cube's lower
// half only, the model with a linear term predicts that the line goes on
// rising at the far end, where the Matérn term alone reverts to the data's
// mean.
func TestGPTrendExtrapolates(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var x [][]float64
	var y []float64
	for range 12 {
		p := []float64{r.Float64() * 0.5, r.Float64()}
		x = append(x, p)
		y = append(y, 2*p[0]+0.01*r.NormFloat64())
	}
	far := [][]float64{{0.95, 0.5}}
	pred := func(trend bool) float64 {
		g, err := fitGP(t.Context(), x, y, 100, gpPrior{ls: lsPrior, trend: trend})
		if err != nil {
			t.Fatal(err)
		}
		if trend != (g.sl2 > 0) {
			t.Fatalf("trend %v: linear variance %v", trend, g.sl2)
		}
		t.Logf("trend %v: ls %v sf2 %.3g sn2 %.3g sl2 %.3g", trend, g.ls, g.sf2, g.sn2, g.sl2)
		return g.predict(far).mu[0]*g.std + g.mean
	}
	const truth = 1.9
	with, without := pred(true), pred(false)
	// The fitted model's own linear term carries the slope: the same
	// hyperparameters without it predict the far end worse.
	g, err := fitGP(t.Context(), x, y, 100, gpPrior{ls: lsPrior, trend: true})
	if err != nil {
		t.Fatal(err)
	}
	flat := *g
	flat.sl2 = 0
	ys := make([]float64, len(y))
	for i, v := range y {
		ys[i] = (v - g.mean) / g.std
	}
	if err := flat.condition(ys); err != nil {
		t.Fatal(err)
	}
	if f := flat.predict(far).mu[0]*g.std + g.mean; math.Abs(f-truth) < math.Abs(with-truth)+0.1 {
		t.Errorf("at x0 = 0.95 the fitted model predicts %.3f, and %.3f without its linear term: the term does not carry the slope (truth %.1f)", with, f, truth)
	}
	if math.Abs(with-truth) > 0.25 {
		t.Errorf("with the linear term the prediction at x0 = 0.95 is %.3f, want about %.1f", with, truth)
	}
	if math.Abs(without-truth) < 2*math.Abs(with-truth) {
		t.Errorf("without the linear term the prediction at x0 = 0.95 is %.3f, with it %.3f: the term made no difference (truth %.1f)", without, with, truth)
	}
}

// TestGPWarpFitsANonStationaryFunction: a function that oscillates
// faster and faster along x0 has no one lengthscale; with input warping
// the model stretches the fast end, learns a warping away from the
// identity, and predicts held-out points better than without.
func TestGPWarpFitsANonStationaryFunction(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	f := func(x []float64) float64 { return math.Sin(25 * x[0] * x[0] * x[0] * x[0]) }
	var x [][]float64
	var y []float64
	for range 30 {
		p := []float64{r.Float64(), r.Float64()}
		x = append(x, p)
		y = append(y, f(p)+0.01*r.NormFloat64())
	}
	var test [][]float64
	for range 200 {
		test = append(test, []float64{r.Float64(), r.Float64()})
	}
	rmse := func(warp bool) float64 {
		g, err := fitGP(t.Context(), x, y, 100, gpPrior{ls: lsPrior, warp: warp})
		if err != nil {
			t.Fatal(err)
		}
		if warp != (g.warp != nil) {
			t.Fatalf("warp %v: warping %v", warp, g.warp)
		}
		if warp {
			t.Logf("warping %+v", g.warp)
			if w := g.warp[0]; math.Abs(math.Log(w.a))+math.Abs(math.Log(w.b)) < 0.2 {
				t.Errorf("x0's warping %+v is about the identity", w)
			}
		}
		return heldOutRMSE(g, test, f)
	}
	with, without := rmse(true), rmse(false)
	t.Logf("held-out RMSE with warping %.3f, without %.3f", with, without)
	if with > 0.8*without {
		t.Errorf("held-out RMSE with warping %.3f, without %.3f: want warping at least 20%% better", with, without)
	}
}

// TestGPFitsASmoothFunction: on noisy samples of a smooth function the fit
// predicts held-out points well, is confident at its data and unsure far
// from it, and learns a longer lengthscale for the dimension that does not
// matter.
func TestGPFitsASmoothFunction(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	f := func(x []float64) float64 { return math.Sin(4*x[0]) + x[0]*x[0] } // x[1] is irrelevant
	var x [][]float64
	var y []float64
	for range 40 {
		p := []float64{r.Float64() * 0.7, r.Float64()} // data only on x0 ∈ [0, 0.7]
		x = append(x, p)
		y = append(y, f(p)+0.02*r.NormFloat64())
	}
	g, err := fitGP(t.Context(), x, y, 100, gpPrior{ls: lsPrior})
	if err != nil {
		t.Fatal(err)
	}
	var test [][]float64
	for range 50 {
		test = append(test, []float64{0.05 + r.Float64()*0.6, r.Float64()})
	}
	p := g.predict(test)
	var sse float64
	for i, xt := range test {
		e := p.mu[i]*g.std + g.mean - f(xt)
		sse += e * e
	}
	if rmse := math.Sqrt(sse / float64(len(test))); rmse > 0.08 {
		t.Errorf("held-out RMSE %.3f, want < 0.08 (noise sd 0.02, signal range ~1.5)", rmse)
	}
	far := g.predict([][]float64{{2.5, 0.5}, x[0]})
	if far.sd(0) < 5*far.sd(1) {
		t.Errorf("sd far from the data %.3g is not well above sd at a data point %.3g", far.sd(0), far.sd(1))
	}
	if g.ls[1] < 2*g.ls[0] {
		t.Errorf("lengthscales %v: the irrelevant dimension should be much longer", g.ls)
	}
	if g.sn2 > 0.05 {
		t.Errorf("noise variance %.3g (standardised) too large for sd 0.02 data", g.sn2)
	}
}

// TestBelieverShrinksVarianceNearThePick: a kriging-believer fantasy at a
// candidate leaves means alone, cuts the variance there, cuts it less at a
// neighbour and barely at a distant point.
func TestBelieverShrinksVarianceNearThePick(t *testing.T) {
	x := [][]float64{{0.1}, {0.9}}
	y := []float64{0, 1}
	g, err := fitGP(t.Context(), x, y, 100, gpPrior{ls: lsPrior})
	if err != nil {
		t.Fatal(err)
	}
	cands := [][]float64{{0.5}, {0.55}, {0.95}}
	p := g.predict(cands)
	mu := append([]float64(nil), p.mu...)
	before := append([]float64(nil), p.vari...)
	p.believe(0)
	for j := range cands {
		if p.mu[j] != mu[j] {
			t.Errorf("mean at %v changed from %v to %v", cands[j], mu[j], p.mu[j])
		}
	}
	drop := func(j int) float64 { return (before[j] - p.vari[j]) / before[j] }
	if !(drop(0) > drop(1) && drop(1) > drop(2)) {
		t.Errorf("variance drops %.3f (pick), %.3f (near), %.3f (far): want decreasing with distance", drop(0), drop(1), drop(2))
	}
	if drop(0) < 0.5 {
		t.Errorf("variance at the pick dropped only %.0f%%", 100*drop(0))
	}
	// A second fantasy composes with the first.
	v1 := p.vari[1]
	p.believe(1)
	if p.vari[1] >= v1 {
		t.Errorf("second fantasy did not shrink its own variance: %v → %v", v1, p.vari[1])
	}
}

func TestFitSubsetKeepsTheBestAndASpread(t *testing.T) {
	y := make([]float64, 300)
	for i := range y {
		y[i] = float64(i % 100) // best values at 99, 199, 299
	}
	sub := fitSubset(y, 100)
	if len(sub) != 100 {
		t.Fatalf("subset of %d, want 100", len(sub))
	}
	in := map[int]bool{}
	for i, j := range sub {
		in[j] = true
		if i > 0 && sub[i-1] >= j {
			t.Fatalf("subset not in history order: %v", sub)
		}
	}
	for _, j := range []int{99, 199, 299, 98, 198, 298} {
		if !in[j] {
			t.Errorf("best point %d (y=%v) left out", j, y[j])
		}
	}
	if sub2 := fitSubset(y, 100); len(sub2) != len(sub) {
		t.Error("fitSubset is not deterministic")
	}
}

// TestGPAdditiveCarriesAnEffect: on a function that is a sum of one
// effect per input, from few trials, the model with the additive part
// predicts held-out points better than the full Matérn kernel alone, and
// gives the additive part a real share of the variance.
func TestGPAdditiveCarriesAnEffect(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	f := func(x []float64) float64 { return math.Sin(4*x[0]) + math.Cos(4*x[1]) + 0.5*x[2] }
	point := func() []float64 { return []float64{r.Float64(), r.Float64(), r.Float64(), r.Float64(), r.Float64()} }
	var x [][]float64
	var y []float64
	for range 20 {
		p := point()
		x = append(x, p)
		y = append(y, f(p)+0.05*r.NormFloat64())
	}
	var test [][]float64
	for range 400 {
		test = append(test, point())
	}
	rmse := func(additive bool) float64 {
		g, err := fitGP(t.Context(), x, y, 100, gpPrior{ls: lsPrior, additive: additive})
		if err != nil {
			t.Fatal(err)
		}
		if additive != (g.sa2 > 0) {
			t.Fatalf("additive %v: the additive part's variance is %v", additive, g.sa2)
		}
		t.Logf("additive %v: ls %.3g sf2 %.3g sn2 %.3g sa2 %.3g", additive, g.ls, g.sf2, g.sn2, g.sa2)
		if additive && g.sa2 < 0.1*g.sf2 {
			t.Errorf("the additive part's variance %.3g is under a tenth of the full part's %.3g on an additive function", g.sa2, g.sf2)
		}
		return heldOutRMSE(g, test, f)
	}
	with, without := rmse(true), rmse(false)
	t.Logf("held-out RMSE: %.3f with the additive part, %.3f without", with, without)
	if with > 0.8*without {
		t.Errorf("held-out RMSE %.3f with the additive part against %.3f without: want at least 20%% lower", with, without)
	}
}

// heldOutRMSE is the root mean squared error of g's posterior mean, in the
// targets' units, against f at the points xs.
func heldOutRMSE(g *gp, xs [][]float64, f func([]float64) float64) float64 {
	p := g.predict(xs)
	var se float64
	for j, x := range xs {
		e := p.mu[j]*g.std + g.mean - f(x)
		se += e * e
	}
	return math.Sqrt(se / float64(len(xs)))
}
