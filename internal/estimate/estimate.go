// Package estimate is the one home of a repeated measurement's summary:
// the geometric mean and a confidence interval on the log scale, as the
// tuner's confirmation ranks candidates and the report draws them.
package estimate

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

// Logs returns the natural logs of the positive samples; a sample of 0 or
// less (nothing served) has no logarithm and is left out.
func Logs(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if x > 0 && !math.IsInf(x, 0) {
			out = append(out, math.Log(x))
		}
	}
	return out
}

// Of computes the geometric mean, the log standard deviation and a
// two-sided t interval at confidence level conf (0.9 means 90%).
func Of(xs []float64, conf float64) Estimate {
	ls := Logs(xs)
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
	half := TQuantile(conf, float64(len(ls)-1)) * sd / math.Sqrt(float64(len(ls)))
	e.Low, e.High, e.Bounded = math.Exp(m-half), math.Exp(m+half), true
	return e
}

// TQuantile is the two-sided critical value of Student's t with df degrees
// of freedom at confidence conf.
func TQuantile(conf, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-conf)/2)
}
