package search

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Thompson sampling over the candidates (Bayes.Thompson): instead of the
// candidate of highest expected improvement, the one that is best in a
// draw from the models' joint posterior. Where many configurations sit
// within a measurement's noise of one another (a plateau of batch sizes
// and thread counts that all serve about as much), EI keeps choosing the
// neighbours of whichever trial measured luckiest; a draw spreads the
// trials over the candidates in proportion to their chance of being the
// best. The constraint is sampled too (Eriksson and Poloczek's scalable
// constrained BO): a candidate counts only when its drawn margin meets
// the SLO and its drawn load indicator says the server comes up; when no
// candidate does, the one whose draw is least over is taken.

// thompsonPool is how many candidates, the highest by the usual
// acquisition, a draw is made over: the posterior covariance is pool²
// kernel evaluations and a pool³ Cholesky, so the pool bounds the cost
// whatever the space's size.
const thompsonPool = 128

// jointDraw draws the latent function at the candidates idx of p (in the
// model's original units) from its joint posterior, or nil when the
// covariance cannot be factorised.
func jointDraw(p *posterior, g *gp, idx []int, rng *rand.Rand) []float64 {
	m := len(idx)
	cov := mat.NewSymDense(m, nil)
	for a, j := range idx {
		for b := a; b < m; b++ {
			c := p.cov(j, idx[b])
			if a == b {
				c = math.Max(c, 0) + 1e-9
			}
			cov.SetSym(a, b, c)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(cov) {
		// Jitter once more before giving up: near-duplicate candidates make
		// the covariance numerically singular.
		for a := range m {
			cov.SetSym(a, a, cov.At(a, a)+1e-6)
		}
		if !ch.Factorize(cov) {
			return nil
		}
	}
	var l mat.TriDense
	ch.LTo(&l)
	z := make([]float64, m)
	for i := range z {
		z[i] = rng.NormFloat64()
	}
	out := make([]float64, m)
	for a := range m {
		s := p.mu[idx[a]]
		for b := 0; b <= a; b++ {
			s += l.At(a, b) * z[b]
		}
		out[a] = s*g.std + g.mean
	}
	return out
}

// thompsonPick returns the index into acq of the candidate a posterior
// draw prefers among the thompsonPool highest by acq (the usual
// acquisition, which screens out what the soft prior, a failed size or a
// near-certain breach already rule out), or -1 when no draw could be made.
// fgp/fpost is the objective model; cgp/cpost the margin model (nil:
// none), split when it models the residual of log QPS (the margin is then
// the residual's draw minus the objective's); lgp/lpost the failure model.
func thompsonPick(acq []float64, used []bool, rng *rand.Rand,
	fgp *gp, fpost *posterior, cgp *gp, cpost *posterior, split bool, lgp *gp, lpost *posterior) int {
	var pool []int
	for j := range acq {
		if !used[j] && !math.IsInf(acq[j], -1) && !math.IsNaN(acq[j]) {
			pool = append(pool, j)
		}
	}
	slices.SortStableFunc(pool, func(a, b int) int { return cmp.Compare(acq[b], acq[a]) })
	pool = pool[:min(len(pool), thompsonPool)]
	if len(pool) == 0 {
		return -1
	}
	f := jointDraw(fpost, fgp, pool, rng)
	if f == nil {
		return -1
	}
	var c, l []float64
	if cpost != nil {
		if c = jointDraw(cpost, cgp, pool, rng); c == nil {
			return -1
		}
		if split {
			for a := range c {
				c[a] -= f[a]
			}
		}
	}
	if lpost != nil {
		if l = jointDraw(lpost, lgp, pool, rng); l == nil {
			return -1
		}
	}
	best, least := -1, -1
	over := func(a int) float64 { // how far the draw is from feasible; ≤ 0 feasible
		o := math.Inf(-1)
		if c != nil {
			o = c[a]
		}
		if l != nil {
			o = math.Max(o, l[a]-0.5)
		}
		return o
	}
	for a := range pool {
		if o := over(a); o <= 0 {
			if best < 0 || f[a] > f[best] {
				best = a
			}
		} else if least < 0 || o < over(least) {
			least = a
		}
	}
	if best < 0 {
		best = least
	}
	return pool[best]
}
