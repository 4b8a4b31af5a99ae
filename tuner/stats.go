package tuner

import (
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Estimate summarises repeated measurements of one configuration's
// objective. Throughput and latency are positive and their run-to-run
// spread is multiplicative (a restart that lands in a worse batching state
// costs a fraction, not a fixed amount), so the estimate is taken on the
// log scale: Mean is the geometric mean, SD the standard deviation of the
// logs, and the interval exp(mean log ± t·sd/√n) is never negative and
// never symmetric in absurd ways (2 repeats at 550 and 1 040 req/s give
// [171, 3 350], not [-453, 3 644]).
type Estimate struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	// SD is the standard deviation of the samples' natural logs.
	SD float64 `json:"sd_log"`
	// Low and High bound a two-sided confidence interval on the geometric
	// mean at the level it was computed with (Student's t on the logs).
	// With fewer than two samples there is no interval: Bounded is false
	// and both are the mean.
	Low     float64 `json:"low"`
	High    float64 `json:"high"`
	Bounded bool    `json:"bounded"`
}

// logs returns the natural logs of the positive samples; a sample of 0 or
// less (nothing served) has no logarithm and is left out.
func logs(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if x > 0 && !math.IsInf(x, 0) {
			out = append(out, math.Log(x))
		}
	}
	return out
}

// estimate computes the geometric mean, the log standard deviation and a
// two-sided t interval at confidence level conf (0.9 means 90%).
func estimate(xs []float64, conf float64) Estimate {
	ls := logs(xs)
	e := Estimate{N: len(ls)}
	if len(ls) == 0 {
		return e
	}
	m, sd := stat.MeanStdDev(ls, nil)
	e.Mean = math.Exp(m)
	if len(ls) < 2 {
		e.Low, e.High = e.Mean, e.Mean
		return e
	}
	e.SD = sd
	half := tQuantile(conf, float64(len(ls)-1)) * sd / math.Sqrt(float64(len(ls)))
	e.Low, e.High, e.Bounded = math.Exp(m-half), math.Exp(m+half), true
	return e
}

// tQuantile is the two-sided critical value of Student's t with df degrees
// of freedom at confidence conf.
func tQuantile(conf, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-conf)/2)
}

// Gain is the relative difference between a candidate's objective and the
// baseline's, oriented so that positive is better: the ratio of geometric
// means less one, with a Welch t confidence interval on the difference of
// mean logs carried over to the same scale.
type Gain struct {
	Ratio float64 `json:"ratio"` // candidate/baseline geometric mean
	Rel   float64 `json:"rel"`   // relative gain, better is positive
	Low   float64 `json:"low"`   // bounds of the interval on Rel
	High  float64 `json:"high"`
	Conf  float64 `json:"conf"`
	// Bounded is false when either side had fewer than two samples: then
	// there is no interval and Low and High equal Rel.
	Bounded bool `json:"bounded"`
}

// gain compares candidate samples c with baseline samples b. maximize says
// which direction is better.
func gain(c, b []float64, maximize bool, conf float64) Gain {
	lc, lb := logs(c), logs(b)
	g := Gain{Conf: conf}
	if len(lc) == 0 || len(lb) == 0 {
		return g
	}
	mc, vc := stat.MeanVariance(lc, nil)
	mb, vb := stat.MeanVariance(lb, nil)
	sign := 1.0
	if !maximize {
		sign = -1
	}
	g.Ratio = math.Exp(mc - mb)
	rel := func(d float64) float64 { return math.Exp(sign*d) - 1 }
	d := mc - mb
	g.Rel = rel(d)
	g.Low, g.High = g.Rel, g.Rel
	if len(lc) < 2 || len(lb) < 2 {
		return g
	}
	g.Bounded = true
	sc, sb := vc/float64(len(lc)), vb/float64(len(lb))
	se := math.Sqrt(sc + sb)
	// Welch–Satterthwaite degrees of freedom.
	df := (sc + sb) * (sc + sb) / (sc*sc/float64(len(lc)-1) + sb*sb/float64(len(lb)-1))
	if se == 0 || math.IsNaN(df) {
		return g
	}
	half := tQuantile(conf, df) * se
	g.Low, g.High = rel(d-sign*half), rel(d+sign*half)
	if g.Low > g.High {
		g.Low, g.High = g.High, g.Low
	}
	return g
}

// allowedBreaches is how many of n confirmation repeats may break the SLO
// for a configuration to stay eligible: none of up to three, then one in
// three. A real server has an unlucky restart now and then (a batching
// state that settles badly, a neighbour's burst); one such repeat among
// four or more says less about the configuration than the rest do.
func allowedBreaches(n int) int { return max(n-1, 0) / 3 }

// overlaps reports whether two estimates' intervals overlap, i.e. the
// repeats so far cannot tell which is better.
func overlaps(a, b Estimate) bool {
	if !a.Bounded || !b.Bounded {
		return true
	}
	return a.Low <= b.High && b.Low <= a.High
}
