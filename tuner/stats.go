package tuner

import (
	"math"

	"gonum.org/v1/gonum/stat"

	"github.com/batchtune/batchtune/internal/estimate"
)

// Estimate summarises repeated measurements of one configuration's
// objective (package estimate: geometric mean, log-scale interval).
type Estimate = estimate.Estimate

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
	lc, lb := estimate.Logs(c), estimate.Logs(b)
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
	half := estimate.TQuantile(conf, df) * se
	g.Low, g.High = rel(d-sign*half), rel(d+sign*half)
	if g.Low > g.High {
		g.Low, g.High = g.High, g.Low
	}
	return g
}
