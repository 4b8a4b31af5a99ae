package search

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"
)

// gp is Gaussian-process regression with a Matérn 5/2 ARD kernel over the
// space's unit-cube features, a constant mean (the data's), and Gaussian
// observation noise; with gpPrior.trend the kernel has a linear term too
// (linear), with gpPrior.additive a first-order additive part (additive),
// and with gpPrior.warp each input passes through a fitted Kumaraswamy CDF
// first (kuma). Targets are standardised; predictions are returned in the
// standardised units and scale converts them back.
type gp struct {
	x          [][]float64
	ls         []float64 // lengthscale per dimension
	sf2, sn2   float64   // signal and noise variance (standardised units)
	sl2        float64   // the linear term's variance (0: none)
	sa2        float64   // the additive part's variance (0: none)
	warp       []kuma    // each input's warping (nil: none); x holds the warped inputs
	mean, std  float64   // standardisation of the targets
	u          blas64.Triangular
	alpha      []float64 // K⁻¹ y (standardised)
	fitPoints  int       // how many points the hyperparameters were fitted on
	fitFailure error     // non-nil when every start failed and defaults were used
}

const sqrt5 = 2.23606797749979

// matern52 is the Matérn 5/2 correlation at scaled distance r.
func matern52(r float64) float64 {
	s := sqrt5 * r
	return (1 + s + s*s/3) * math.Exp(-s)
}

// Bounds and weak priors on the log hyperparameters (MAP estimate: the
// marginal likelihood plus a log-normal prior on each), in units of the
// unit cube and standardised targets.
var (
	lsPrior  = logPrior{mean: 0, sd: 1.0, lo: math.Log(0.01), hi: math.Log(20)}
	sf2Prior = logPrior{mean: 0, sd: 1.5, lo: math.Log(0.01), hi: math.Log(100)}
	sn2Prior = logPrior{mean: math.Log(0.02), sd: 2, lo: math.Log(1e-6), hi: math.Log(2)}
)

type logPrior struct{ mean, sd, lo, hi float64 }

// gpPrior is what a model assumes before it sees a trial: the prior on
// its log lengthscales (lsPrior, or dimScaledPrior), whether its kernel
// has a linear term (Bayes.Trend) or an additive part (Bayes.Additive),
// and whether its inputs are warped (Bayes.Warp).
type gpPrior struct {
	ls       logPrior
	trend    bool
	warp     bool // each input through a fitted Kumaraswamy CDF (Bayes.Warp)
	additive bool // a first-order additive part in the kernel (Bayes.Additive)
}

// warpPrior is the prior on each of a Kumaraswamy CDF's log shape
// parameters: centred on the identity (a = b = 1), as in BoTorch's input
// warping.
var warpPrior = logPrior{mean: 0, sd: 0.75, lo: math.Log(0.1), hi: math.Log(10)}

// kuma is a Kumaraswamy CDF, w(x) = 1 − (1 − xᵃ)ᵇ on [0, 1]: the input
// warping of Snoek, Swersky, Zemel and Adams ("Input warping for Bayesian
// optimization of non-stationary functions", ICML 2014). a = b = 1 is the
// identity; other shapes stretch one end of an input's range and squeeze
// the other, so that one lengthscale can serve a surface that is steep
// near its knee and flat elsewhere.
type kuma struct{ a, b float64 }

// warpEps keeps inputs off 0 and 1, where the CDF's derivatives in a and
// b are singular.
const warpEps = 1e-6

// at returns w(x) and its derivatives in log a and log b.
func (k kuma) at(x float64) (w, da, db float64) {
	x = math.Min(math.Max(x, warpEps), 1-warpEps)
	xa := math.Pow(x, k.a)
	q := 1 - xa
	qb := math.Pow(q, k.b)
	w = 1 - qb
	da = k.a * k.b * qb / q * xa * math.Log(x) // a ∂w/∂a
	db = -k.b * qb * math.Log(q)               // b ∂w/∂b
	return w, da, db
}

// warped is x with each input through its warping (x itself when none).
func (g *gp) warped(x []float64) []float64 {
	if g.warp == nil {
		return x
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i], _, _ = g.warp[i].at(v)
	}
	return out
}

// sl2Prior is the weak prior on the linear term's log variance, in the
// standardised units. It is broad: when one of d inputs carries the whole
// slope, explaining standardised targets takes a variance of the order
// of d, more when the trials cover part of that input's range.
var sl2Prior = logPrior{mean: 0, sd: 2, lo: math.Log(1e-4), hi: math.Log(1000)}

// linear is the linear kernel term's correlation of two inputs: their
// product about the unit cube's centre, scaled so that a corner's
// variance is 1 whatever the dimension. With a variance of its own (gp.sl2)
// it is Bayesian linear regression on the inputs, added to the Matérn
// term: away from the trials the posterior mean follows the fitted slope
// (more rows per batch, more QPS) instead of reverting to the data's mean.
func linear(a, b []float64) float64 {
	var v float64
	for i := range a {
		v += (a[i] - 0.5) * (b[i] - 0.5)
	}
	return 4 * v / float64(len(a))
}

// sa2Prior is the weak prior on the additive part's log variance, in the
// standardised units: centred on the full Matérn part's (sf2Prior), so that
// before the data speak the two explain the targets' variance about
// equally.
var sa2Prior = logPrior{mean: 0, sd: 1.5, lo: math.Log(1e-4), hi: math.Log(100)}

// additive is the additive part's correlation of two inputs: the mean over
// the dimensions of a one-dimensional Matérn 5/2 correlation at that
// dimension's scaled distance, the lengthscales shared with the full part.
// With a variance of its own (gp.sa2) beside the full part it is the
// first- plus full-order additive kernel of Duvenaud, Nickisch and
// Rasmussen ("Additive Gaussian processes", NeurIPS 2011): what one
// parameter does is carried across the values of the others, which with
// a few noisy trials a kernel of the full distance alone cannot do (two
// trials that differ in the queue and in the batch size are far apart).
func additive(a, b, ls []float64) float64 {
	var v float64
	for i := range a {
		v += matern52(math.Abs(a[i]-b[i]) / ls[i])
	}
	return v / float64(len(a))
}

// dimScaledPrior is the lengthscale prior of Hvarfner, Hellsten and Nardi
// ("Vanilla Bayesian optimization performs great in high dimensions",
// ICML 2024): log-normal with median e^(√2 + ln(d)/2) and σ √3, so that
// with more dimensions the model starts from smoother functions and
// explores fewer corners of the cube.
func dimScaledPrior(d int) logPrior {
	p := lsPrior
	p.mean = math.Sqrt2 + math.Log(float64(d))/2
	p.sd = math.Sqrt(3)
	p.hi = math.Max(p.hi, p.mean+2*p.sd)
	return p
}

// penalty is the negative log prior (up to a constant) plus a steep wall
// outside [lo, hi], and its derivative.
func (p logPrior) penalty(t float64) (float64, float64) {
	z := (t - p.mean) / p.sd
	v, g := 0.5*z*z, z/p.sd
	if t < p.lo {
		v += 50 * (p.lo - t) * (p.lo - t)
		g -= 100 * (p.lo - t)
	}
	if t > p.hi {
		v += 50 * (t - p.hi) * (t - p.hi)
		g += 100 * (t - p.hi)
	}
	return v, g
}

func (p logPrior) clamp(t float64) float64 { return math.Max(p.lo, math.Min(p.hi, t)) }

// fitGP fits hyperparameters by maximising the marginal likelihood (with
// the weak priors above) on at most fitMax of the points, chosen
// deterministically, with L-BFGS from two starts, then conditions on every
// point.
//
// prior is the prior on the log lengthscales, and whether the kernel has a
// linear term and the inputs a warping.
func fitGP(ctx context.Context, x [][]float64, y []float64, fitMax int, prior gpPrior) (*gp, error) {
	ls := prior.ls
	n := len(x)
	d := len(x[0])
	mean, std := meanStd(y)
	ys := make([]float64, n)
	for i, v := range y {
		ys[i] = (v - mean) / std
	}

	sub := fitSubset(ys, fitMax)
	sx := make([][]float64, len(sub))
	sy := make([]float64, len(sub))
	for i, j := range sub {
		sx[i], sy[i] = x[j], ys[j]
	}
	ml := newMarginal(sx, sy, prior.trend, prior.warp, prior.additive)
	ml.ls = ls
	nt := ml.w0 // log ls₁..d, log sf2, log sn2[, log sl2][, log sa2][, log a₁, log b₁ … log a_d, log b_d]
	if prior.warp {
		nt += 2 * d
	}

	// The second start is the lengthscale prior's median (1 for lsPrior).
	starts := [][3]float64{{math.Log(0.3), 0, math.Log(0.01)}, {ls.mean, 0, math.Log(0.1)}}
	best := math.Inf(1)
	var theta []float64
	var fitErr error
	for _, s := range starts {
		init := make([]float64, nt)
		for i := range d {
			init[i] = s[0]
		}
		init[d], init[d+1] = s[1], s[2]
		if prior.trend {
			init[d+2] = sl2Prior.mean
		}
		if prior.additive {
			init[ml.ai] = sa2Prior.mean
		}
		// The warpings start at the identity (log a = log b = 0).
		prob := optimize.Problem{
			Func: ml.value,
			Grad: ml.grad,
			Status: func() (optimize.Status, error) {
				if err := ctx.Err(); err != nil {
					return optimize.Failure, err
				}
				return optimize.NotTerminated, nil
			},
		}
		res, err := optimize.Minimize(prob, init, &optimize.Settings{
			MajorIterations: 40,
			Converger:       &optimize.FunctionConverge{Absolute: 1e-4, Relative: 1e-4, Iterations: 4},
		}, &optimize.LBFGS{})
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if res == nil {
			fitErr = errors.Join(fitErr, err)
			continue
		}
		// A failed line search still leaves the best point found.
		if res.F < best && !math.IsNaN(res.F) {
			best, theta = res.F, slices.Clone(res.X)
		}
	}
	if theta == nil {
		theta = make([]float64, nt)
		for i := range d {
			theta[i] = ls.mean
		}
		theta[d], theta[d+1] = sf2Prior.mean, sn2Prior.mean
		if prior.trend {
			theta[d+2] = sl2Prior.mean
		}
		if prior.additive {
			theta[ml.ai] = sa2Prior.mean
		}
	}
	g := &gp{x: x, mean: mean, std: std, fitPoints: len(sub), fitFailure: fitErr}
	if prior.warp {
		g.warp = make([]kuma, d)
		for i := range d {
			g.warp[i] = kuma{math.Exp(warpPrior.clamp(theta[ml.w0+2*i])), math.Exp(warpPrior.clamp(theta[ml.w0+2*i+1]))}
		}
		g.x = make([][]float64, n)
		for i, v := range x {
			g.x[i] = g.warped(v)
		}
	}
	g.ls = make([]float64, d)
	for i := range d {
		g.ls[i] = math.Exp(ls.clamp(theta[i]))
	}
	g.sf2 = math.Exp(sf2Prior.clamp(theta[d]))
	g.sn2 = math.Exp(sn2Prior.clamp(theta[d+1]))
	if prior.trend {
		g.sl2 = math.Exp(sl2Prior.clamp(theta[d+2]))
	}
	if prior.additive {
		g.sa2 = math.Exp(sa2Prior.clamp(theta[ml.ai]))
	}
	if err := g.condition(ys); err != nil {
		return nil, err
	}
	return g, nil
}

func meanStd(y []float64) (float64, float64) {
	var m float64
	for _, v := range y {
		m += v
	}
	m /= float64(len(y))
	var s float64
	for _, v := range y {
		s += (v - m) * (v - m)
	}
	s = math.Sqrt(s / float64(len(y)))
	if s < 1e-9 || math.IsNaN(s) {
		s = 1
	}
	return m, s
}

// fitSubset chooses at most max points to fit hyperparameters on: all of
// them when few, else the best half by target and an even spread of the
// rest in history order.
func fitSubset(y []float64, limit int) []int {
	n := len(y)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if n <= limit {
		return all
	}
	byY := slices.Clone(all)
	slices.SortStableFunc(byY, func(a, b int) int { return cmp.Compare(y[b], y[a]) })
	chosen := map[int]bool{}
	for _, i := range byY[:limit/2] {
		chosen[i] = true
	}
	var rest []int
	for _, i := range all {
		if !chosen[i] {
			rest = append(rest, i)
		}
	}
	need := limit - len(chosen)
	for k := range need {
		chosen[rest[k*len(rest)/need]] = true
	}
	out := make([]int, 0, limit)
	for _, i := range all {
		if chosen[i] {
			out = append(out, i)
		}
	}
	return out
}

// condition factorises K + sn2 I for the fitted hyperparameters and solves
// for alpha.
func (g *gp) condition(ys []float64) error {
	n := len(g.x)
	k := mat.NewSymDense(n, nil)
	for a := range n {
		for b := a; b < n; b++ {
			v := g.kern(g.x[a], g.x[b])
			if a == b {
				v += g.sn2 + 1e-9
			}
			k.SetSym(a, b, v)
		}
	}
	var ch mat.Cholesky
	for jitter := 1e-8; !ch.Factorize(k); jitter *= 10 {
		if jitter > 1 {
			return errors.New("search: gaussian process covariance is not positive definite")
		}
		for a := range n {
			k.SetSym(a, a, k.At(a, a)+jitter)
		}
	}
	var u mat.TriDense
	ch.UTo(&u)
	g.u = u.RawTriangular()
	al := mat.NewVecDense(n, nil)
	if err := ch.SolveVecTo(al, mat.NewVecDense(n, ys)); err != nil {
		var c mat.Condition
		if !errors.As(err, &c) {
			return err
		}
	}
	g.alpha = al.RawVector().Data
	return nil
}

func (g *gp) kern(a, b []float64) float64 {
	var r2 float64
	for i := range a {
		z := (a[i] - b[i]) / g.ls[i]
		r2 += z * z
	}
	k := g.sf2 * matern52(math.Sqrt(r2))
	if g.sl2 > 0 {
		k += g.sl2 * linear(a, b)
	}
	if g.sa2 > 0 {
		k += g.sa2 * additive(a, b, g.ls)
	}
	return k
}

// posterior is the GP's prediction at m candidate points: mean and variance
// of the latent function (standardised units), and the rows of
// V = Kₓ*ᵀ U⁻¹ that give posterior covariances between candidates.
type posterior struct {
	g    *gp
	xs   [][]float64
	mu   []float64
	vari []float64
	v    blas64.General // m × n
	// fantasies are the kriging-believer updates applied so far: each the
	// vector cov(·, p)/sqrt(var(p)+sn2) over the candidates.
	fantasies [][]float64
}

// predict computes the posterior at xs.
func (g *gp) predict(xs [][]float64) *posterior {
	if g.warp != nil {
		w := make([][]float64, len(xs))
		for j, x := range xs {
			w[j] = g.warped(x)
		}
		xs = w
	}
	n, m := len(g.x), len(xs)
	p := &posterior{g: g, xs: xs, mu: make([]float64, m), vari: make([]float64, m)}
	p.v = blas64.General{Rows: m, Cols: n, Stride: n, Data: make([]float64, m*n)}
	for j, x := range xs {
		row := p.v.Data[j*n : (j+1)*n]
		var mu float64
		for i, xi := range g.x {
			row[i] = g.kern(x, xi)
			mu += row[i] * g.alpha[i]
		}
		p.mu[j] = mu
	}
	if n > 0 && m > 0 {
		blas64.Trsm(blas.Right, blas.NoTrans, 1, g.u, p.v)
	}
	for j := range xs {
		row := p.v.Data[j*n : (j+1)*n]
		var s float64
		for _, r := range row {
			s += r * r
		}
		p.vari[j] = math.Max(g.kern(xs[j], xs[j])-s, 1e-12)
	}
	return p
}

// sd is the latent standard deviation at candidate j.
func (p *posterior) sd(j int) float64 { return math.Sqrt(p.vari[j]) }

// cov is the latent posterior covariance of candidates j and k (in the
// standardised units), the believer's fantasies applied.
func (p *posterior) cov(j, k int) float64 {
	n := len(p.g.x)
	rj, rk := p.v.Data[j*n:(j+1)*n], p.v.Data[k*n:(k+1)*n]
	c := p.g.kern(p.xs[j], p.xs[k])
	for i := range n {
		c -= rj[i] * rk[i]
	}
	for _, f := range p.fantasies {
		c -= f[j] * f[k]
	}
	return c
}

// believe conditions the posterior on a fantasy observation at candidate
// j equal to its mean (kriging believer): means are unchanged, variances
// shrink around j. Cost O(m (n + fantasies)).
func (p *posterior) believe(j int) {
	m := len(p.xs)
	denom := math.Sqrt(p.vari[j] + p.g.sn2)
	f := make([]float64, m)
	for c := range m {
		f[c] = p.cov(c, j) / denom
	}
	for c := range m {
		p.vari[c] = math.Max(p.vari[c]-f[c]*f[c], 1e-12)
	}
	p.fantasies = append(p.fantasies, f)
}

// marginal evaluates the negative log marginal likelihood (plus priors) of
// the hyperparameters θ = (log ls₁..d, log sf2, log sn2[, log sl2][, log
// sa2][, log a₁, log b₁, …, log a_d, log b_d]) and its gradient.
type marginal struct {
	x          [][]float64
	y          []float64
	ls         logPrior    // prior on the log lengthscales
	diff2      [][]float64 // per dimension, (x_a - x_b)² for a, b in row-major n×n
	lin        []float64   // linear(x_a, x_b) in row-major n×n; nil without the linear term
	ai         int         // index in θ of log sa2; 0 without the additive part
	w0         int         // index in θ of the first warping parameter
	wx         [][]float64 // the warped inputs at the last θ (warp only)
	dwa, dwb   [][]float64 // their derivatives in log a and log b
	rbuf, ebuf []float64   // per-pair scratch
	abuf       []float64   // per pair, the additive correlation (additive)
	// cache of the last evaluation
	last []float64
	f    float64
	g    []float64
}

func newMarginal(x [][]float64, y []float64, trend, warp, additive bool) *marginal {
	n, d := len(x), len(x[0])
	ml := &marginal{x: x, y: y, diff2: make([][]float64, d), w0: d + 2}
	if trend {
		ml.w0++
		ml.lin = make([]float64, n*n)
	}
	if additive {
		ml.ai = ml.w0
		ml.w0++
	}
	for k := range d {
		ml.diff2[k] = make([]float64, n*n)
	}
	if warp {
		ml.wx, ml.dwa, ml.dwb = make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for a := range n {
			ml.wx[a], ml.dwa[a], ml.dwb[a] = make([]float64, d), make([]float64, d), make([]float64, d)
		}
		return ml // the distances depend on θ: eval computes them
	}
	ml.distances(x)
	return ml
}

// distances fills diff2 (and lin) from the inputs x.
func (ml *marginal) distances(x [][]float64) {
	n, d := len(x), len(x[0])
	for k := range d {
		dk := ml.diff2[k]
		for a := range n {
			for b := range n {
				z := x[a][k] - x[b][k]
				dk[a*n+b] = z * z
			}
		}
	}
	if ml.lin != nil {
		for a := range n {
			for b := range n {
				ml.lin[a*n+b] = linear(x[a], x[b])
			}
		}
	}
}

func (ml *marginal) value(theta []float64) float64 {
	ml.eval(theta)
	return ml.f
}

func (ml *marginal) grad(grad, theta []float64) {
	ml.eval(theta)
	copy(grad, ml.g)
}

// eval computes the objective and gradient at theta, reusing the last
// result when theta has not changed (L-BFGS asks for both separately).
func (ml *marginal) eval(theta []float64) {
	if ml.last != nil && slices.Equal(ml.last, theta) {
		return
	}
	ml.last = slices.Clone(theta)
	n, d := len(ml.x), len(ml.diff2)
	if ml.g == nil {
		ml.g = make([]float64, len(theta))
	}
	for i := range ml.g {
		ml.g[i] = 0
	}
	inv := make([]float64, d)
	for k := range d {
		inv[k] = math.Exp(-2 * theta[k]) // 1/ls²
	}
	sf2, sn2 := math.Exp(theta[d]), math.Exp(theta[d+1])
	var sl2 float64
	if ml.lin != nil {
		sl2 = math.Exp(theta[d+2])
	}
	var sa2 float64
	if ml.ai > 0 {
		sa2 = math.Exp(theta[ml.ai])
	}
	if ml.wx != nil {
		for a, x := range ml.x {
			for k := range d {
				w := kuma{math.Exp(theta[ml.w0+2*k]), math.Exp(theta[ml.w0+2*k+1])}
				ml.wx[a][k], ml.dwa[a][k], ml.dwb[a][k] = w.at(x[k])
			}
		}
		ml.distances(ml.wx)
	}

	// r, e^{−√5 r} and the kernel for each pair (a ≤ b), computed once:
	// the exponential dominates the cost.
	r := ml.rbuf[:0]
	e := ml.ebuf[:0]
	ad := ml.abuf[:0]
	kmat := mat.NewSymDense(n, nil)
	for a := range n {
		for b := a; b < n; b++ {
			var r2 float64
			for k := range d {
				r2 += ml.diff2[k][a*n+b] * inv[k]
			}
			rab := math.Sqrt(r2)
			eab := math.Exp(-sqrt5 * rab)
			r, e = append(r, rab), append(e, eab)
			v := sf2 * (1 + sqrt5*rab + 5*rab*rab/3) * eab
			if ml.lin != nil {
				v += sl2 * ml.lin[a*n+b]
			}
			if sa2 > 0 {
				var c float64
				for k := range d {
					c += matern52(math.Sqrt(ml.diff2[k][a*n+b] * inv[k]))
				}
				ad = append(ad, c/float64(d))
				v += sa2 * ad[len(ad)-1]
			}
			if a == b {
				v += sn2 + 1e-9
			}
			kmat.SetSym(a, b, v)
		}
	}
	ml.rbuf, ml.ebuf, ml.abuf = r, e, ad
	var ch mat.Cholesky
	if !ch.Factorize(kmat) {
		// Not positive definite at these hyperparameters: a large value
		// sends the line search back.
		ml.f = 1e10
		return
	}
	alpha := mat.NewVecDense(n, nil)
	if err := ch.SolveVecTo(alpha, mat.NewVecDense(n, ml.y)); err != nil {
		var c mat.Condition
		if !errors.As(err, &c) {
			ml.f = 1e10
			return
		}
	}
	var fit float64
	for i, v := range ml.y {
		fit += v * alpha.AtVec(i)
	}
	f := 0.5*fit + 0.5*ch.LogDet() + 0.5*float64(n)*math.Log(2*math.Pi)

	var kinv mat.SymDense
	if err := ch.InverseTo(&kinv); err != nil {
		var c mat.Condition
		if !errors.As(err, &c) {
			ml.f = 1e10
			return
		}
	}
	// dNLML/dθ = ½ tr((K⁻¹ − ααᵀ) ∂K/∂θ), summed over a ≤ b with the
	// off-diagonal pairs counted twice.
	w := kinv.RawSymmetric()
	al := alpha.RawVector().Data
	var gsf, gsn, gsl, gsa float64
	p := 0
	for a := range n {
		for b := a; b < n; b, p = b+1, p+1 {
			wab := w.Data[a*w.Stride+b] - al[a]*al[b]
			rab, eab := r[p], e[p]
			kab := sf2 * (1 + sqrt5*rab + 5*rab*rab/3) * eab
			var lab float64
			if ml.lin != nil {
				lab = sl2 * ml.lin[a*n+b]
			}
			if ml.wx != nil && ml.lin != nil {
				// The linear term's ∂/∂θ = sl2 · 4/d (∂w_a (w_b − ½) +
				// (w_a − ½) ∂w_b), halved, and doubled off the diagonal.
				l := wab * sl2 * 4 / float64(d) / 2
				if a != b {
					l *= 2
				}
				wa, wb := ml.wx[a], ml.wx[b]
				for k := range d {
					ml.g[ml.w0+2*k] += l * (ml.dwa[a][k]*(wb[k]-0.5) + (wa[k]-0.5)*ml.dwa[b][k])
					ml.g[ml.w0+2*k+1] += l * (ml.dwb[a][k]*(wb[k]-0.5) + (wa[k]-0.5)*ml.dwb[b][k])
				}
			}
			if sa2 > 0 {
				if a == b {
					gsa += wab * sa2 * ad[p]
				} else {
					gsa += 2 * wab * sa2 * ad[p]
					ml.additiveGrad(a, b, 2*wab*sa2/float64(d)*5/3, inv)
				}
			}
			if a == b {
				gsf += wab * kab
				gsn += wab * sn2
				gsl += wab * lab
				continue
			}
			gsf += 2 * wab * kab
			gsl += 2 * wab * lab
			// ∂k/∂log ls_k = sf2 · 5/3 (1 + √5 r) e^{−√5 r} · d_k²/ls_k².
			common := 2 * wab * sf2 * 5 / 3 * (1 + sqrt5*rab) * eab
			for k := range d {
				ml.g[k] += common * ml.diff2[k][a*n+b] * inv[k]
			}
			if ml.wx != nil {
				// ∂k/∂d_k² = −sf2 · 5/6 (1 + √5 r) e^{−√5 r} / ls_k² and
				// ∂d_k²/∂θ = 2 Δw Δ∂w; common carries the pair's double
				// count, the ½ is applied here.
				wa, wb := ml.wx[a], ml.wx[b]
				for k := range d {
					c := -common / 2 * inv[k] * (wa[k] - wb[k])
					ml.g[ml.w0+2*k] += c * (ml.dwa[a][k] - ml.dwa[b][k])
					ml.g[ml.w0+2*k+1] += c * (ml.dwb[a][k] - ml.dwb[b][k])
				}
			}
		}
	}
	for k := range d {
		ml.g[k] *= 0.5
	}
	ml.g[d] = 0.5 * gsf
	ml.g[d+1] = 0.5 * gsn
	if ml.lin != nil {
		ml.g[d+2] = 0.5 * gsl
	}
	if ml.ai > 0 {
		ml.g[ml.ai] = 0.5 * gsa
	}

	for k := range d {
		v, gk := ml.ls.penalty(theta[k])
		f += v
		ml.g[k] += gk
	}
	v, gk := sf2Prior.penalty(theta[d])
	f += v
	ml.g[d] += gk
	v, gk = sn2Prior.penalty(theta[d+1])
	f += v
	ml.g[d+1] += gk
	if ml.lin != nil {
		v, gk = sl2Prior.penalty(theta[d+2])
		f += v
		ml.g[d+2] += gk
	}
	if ml.ai > 0 {
		v, gk = sa2Prior.penalty(theta[ml.ai])
		f += v
		ml.g[ml.ai] += gk
	}
	for k := ml.w0; ml.wx != nil && k < len(theta); k++ {
		v, gk = warpPrior.penalty(theta[k])
		f += v
		ml.g[k] += gk
	}
	ml.f = f
}

// additiveGrad adds the additive part's share of the pair (a, b) (a ≠ b)
// to the gradient: ∂M(r_k)/∂log ls_k = 5/3 (1 + √5 r_k) e^{−√5 r_k} r_k²
// per dimension, to be halved with the full part's; and with warping,
// ∂M(r_k)/∂Δw_k² = −5/6 (1 + √5 r_k) e^{−√5 r_k} / ls_k² times ∂Δw_k²/∂θ
// = 2 Δw_k Δ∂w_k, the ½ applied here as for the full part. c is
// 2 W_ab · sa2/d · 5/3: the pair's double count, the part's variance and
// its mean over the dimensions.
func (ml *marginal) additiveGrad(a, b int, c float64, inv []float64) {
	n := len(ml.x)
	for k := range inv {
		rk2 := ml.diff2[k][a*n+b] * inv[k]
		rk := math.Sqrt(rk2)
		ek := (1 + sqrt5*rk) * math.Exp(-sqrt5*rk)
		ml.g[k] += c * ek * rk2
		if ml.wx != nil {
			cw := -c / 2 * ek * inv[k] * (ml.wx[a][k] - ml.wx[b][k])
			ml.g[ml.w0+2*k] += cw * (ml.dwa[a][k] - ml.dwa[b][k])
			ml.g[ml.w0+2*k+1] += cw * (ml.dwb[a][k] - ml.dwb[b][k])
		}
	}
}
