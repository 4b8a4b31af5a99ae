package tuner

import (
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Estimate summarises repeated measurements of one configuration's objective.
type Estimate struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	// Low and High bound a two-sided confidence interval on the mean at the
	// level it was computed with (Student's t). With fewer than two
	// samples there is no interval: Bounded is false and both are the mean.
	Low     float64 `json:"low"`
	High    float64 `json:"high"`
	Bounded bool    `json:"bounded"`
}

// estimate computes mean, standard deviation and a two-sided t interval at
// confidence level conf (0.9 means 90%).
func estimate(xs []float64, conf float64) Estimate {
	e := Estimate{N: len(xs)}
	if len(xs) == 0 {
		return e
	}
	e.Mean, e.SD = stat.MeanStdDev(xs, nil)
	if len(xs) < 2 {
		e.SD = 0
		e.Low, e.High = e.Mean, e.Mean
		return e
	}
	half := tQuantile(conf, float64(len(xs)-1)) * e.SD / math.Sqrt(float64(len(xs)))
	e.Low, e.High, e.Bounded = e.Mean-half, e.Mean+half, true
	return e
}

// tQuantile is the two-sided critical value of Student's t with df degrees
// of freedom at confidence conf.
func tQuantile(conf, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-conf)/2)
}

// Gain is the relative difference between a candidate's mean objective and
// the baseline's, oriented so that positive is better, with a Welch t
// confidence interval on the difference of means divided by the baseline
// mean.
type Gain struct {
	Ratio float64 `json:"ratio"` // candidate/baseline mean
	Rel   float64 `json:"rel"`   // (candidate-baseline)/baseline, better is positive
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
	mc, vc := stat.MeanVariance(c, nil)
	mb, vb := stat.MeanVariance(b, nil)
	g := Gain{Conf: conf}
	if mb == 0 || len(c) == 0 || len(b) == 0 {
		return g
	}
	g.Ratio = mc / mb
	sign := 1.0
	if !maximize {
		sign = -1
	}
	g.Rel = sign * (mc - mb) / math.Abs(mb)
	g.Low, g.High = g.Rel, g.Rel
	if len(c) < 2 || len(b) < 2 {
		return g
	}
	g.Bounded = true
	sc, sb := vc/float64(len(c)), vb/float64(len(b))
	se := math.Sqrt(sc + sb)
	// Welch–Satterthwaite degrees of freedom.
	df := (sc + sb) * (sc + sb) / (sc*sc/float64(len(c)-1) + sb*sb/float64(len(b)-1))
	if se == 0 || math.IsNaN(df) {
		return g
	}
	half := tQuantile(conf, df) * se / math.Abs(mb)
	g.Low, g.High = g.Rel-half, g.Rel+half
	return g
}
