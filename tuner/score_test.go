package tuner

import (
	"math"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
)

func TestScore(t *testing.T) {
	ms := time.Millisecond
	ok := func(qps float64, p99 time.Duration) *probe.Result {
		return &probe.Result{Valid: true, StopReason: probe.StopStable, QPS: qps, Latency: probe.Percentiles{P99: p99, P999: 2 * p99}}
	}
	tests := []struct {
		name      string
		objective configs.Objective
		r         *probe.Result
		state     store.TrialState
		obj       float64
		feasible  bool
	}{
		// Under the SLO: its throughput is the objective.
		{"feasible", configs.ObjectiveMaxThroughput, ok(900, 20*ms), store.TrialSucceeded, 900, true},
		// P99 over the SLO: measured, kept, infeasible.
		{"slow", configs.ObjectiveMaxThroughput, ok(1500, 31*ms), store.TrialSucceeded, 1500, false},
		// Errors over the budget make it infeasible too.
		{"errors", configs.ObjectiveMaxThroughput, func() *probe.Result {
			r := ok(900, 20*ms)
			r.ErrorRate, r.Errors = 0.05, map[string]int64{"Unavailable": 45}
			return r
		}(), store.TrialSucceeded, 900, false},
		// The probe stopped early on a certain breach.
		{"early", configs.ObjectiveMaxThroughput, func() *probe.Result {
			r := ok(400, 80*ms)
			r.StopReason = probe.StopSLOBreach
			return r
		}(), store.TrialEarlyStopped, 400, false},
		// A generator-bound measurement is not scored.
		{"invalid", configs.ObjectiveMaxThroughput, &probe.Result{Valid: false, InvalidReason: "generator CPU 97%"}, store.TrialInvalid, math.NaN(), false},
		// min_latency: P99 in seconds, feasible only when the rate was kept.
		{"latency", configs.ObjectiveMinLatency, func() *probe.Result {
			r := ok(500, 12*ms)
			r.OfferedRate, r.RateKept = 500, true
			return r
		}(), store.TrialSucceeded, 0.012, true},
		// min_latency that fell 10% short of the rate.
		{"latency_short", configs.ObjectiveMinLatency, func() *probe.Result {
			r := ok(450, 12*ms)
			r.OfferedRate, r.RateKept = 500, true
			return r
		}(), store.TrialSucceeded, 0.012, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := configs.DefaultStudy()
			s.SLO.Latency = configs.Duration(30 * ms)
			s.SLO.ErrorRate = 0.001
			s.Objective = tt.objective
			v := score(s, tt.r)
			if v.State != tt.state || v.Feasible != tt.feasible {
				t.Errorf("state %s feasible %v (reason %q), want %s %v", v.State, v.Feasible, v.Reason, tt.state, tt.feasible)
			}
			if math.IsNaN(tt.obj) {
				if v.Objective != nil {
					t.Errorf("objective %v, want none", *v.Objective)
				}
				return
			}
			if v.Objective == nil || math.Abs(*v.Objective-tt.obj) > 1e-9 {
				t.Errorf("objective %v, want %v", v.Objective, tt.obj)
			}
			if !v.Feasible && v.Reason == "" {
				t.Error("infeasible without a reason")
			}
		})
	}
}

func TestEstimateAndGain(t *testing.T) {
	// mean 10, sd 1 over 4 samples: t(0.975, 3) = 3.182, half-width 1.591.
	e := estimate([]float64{9, 10, 10, 11}, 0.95)
	sd := math.Sqrt(2.0 / 3)
	if e.Mean != 10 || math.Abs(e.SD-sd) > 1e-12 || !e.Bounded {
		t.Fatalf("estimate = %+v", e)
	}
	if half := 3.182446 * sd / 2; math.Abs(e.High-10-half) > 1e-4 {
		t.Errorf("half-width %v, want %v", e.High-10, half)
	}
	if one := estimate([]float64{5}, 0.95); one.Bounded || one.Low != 5 || one.High != 5 {
		t.Errorf("one sample: %+v, want unbounded at the mean", one)
	}
	// Maximising: 12 vs 10 is +20%; minimising the same numbers is -20%.
	g := gain([]float64{11, 12, 13}, []float64{9, 10, 11}, true, 0.9)
	if math.Abs(g.Rel-0.2) > 1e-12 || !(g.Low < 0.2 && g.High > 0.2) || !g.Bounded {
		t.Errorf("gain = %+v, want +20%% with an interval around it", g)
	}
	if g := gain([]float64{11, 12, 13}, []float64{9, 10, 11}, false, 0.9); math.Abs(g.Rel+0.2) > 1e-12 {
		t.Errorf("minimising gain = %+v, want -20%%", g)
	}
	// Welch's df: equal variances and sizes give df = 2(n-1) = 4; the
	// interval's half-width is t(0.95, 4)·sqrt(2/3) / 10 = 2.1318·0.8165/10.
	if half := 2.131847 * math.Sqrt(2.0/3) / 10; math.Abs((g.High-g.Rel)-half) > 1e-5 {
		t.Errorf("half-width %v, want %v", g.High-g.Rel, half)
	}
}
