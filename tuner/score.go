package tuner

import (
	"fmt"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
)

// verdict is what a measurement means for a study.
type verdict struct {
	State     store.TrialState
	Objective *float64 // nil when nothing scorable was measured
	Feasible  bool
	Reason    string // why it is infeasible, early-stopped or invalid
	Summary   store.Summary
}

// quantile returns the latency percentile q of p. Only the quantiles a probe
// reports are supported; study validation keeps slo.quantile to them.
func quantile(p probe.Percentiles, q float64) (time.Duration, error) {
	switch q {
	case 0.5:
		return p.P50, nil
	case 0.9:
		return p.P90, nil
	case 0.95:
		return p.P95, nil
	case 0, 0.99:
		return p.P99, nil
	case 0.999:
		return p.P999, nil
	}
	return 0, fmt.Errorf("slo.quantile: %g is not one the probe reports (0.5, 0.9, 0.95, 0.99, 0.999)", q)
}

// checkQuantile reports a quantile the probe does not measure as a problem
// of slo.quantile.
func checkQuantile(q float64) error {
	if _, err := quantile(probe.Percentiles{}, q); err != nil {
		var ps configs.Problems
		ps.Add("slo.quantile", "%g is not one the probe reports (0.5, 0.9, 0.95, 0.99, 0.999)", q)
		return ps
	}
	return nil
}

// score judges r against the study's objective and SLO. It never fails: a
// result that cannot be scored is an invalid trial with the reason.
func score(s *configs.Study, r *probe.Result) verdict {
	v := verdict{Summary: summarize(r)}
	if !r.Valid {
		v.State = store.TrialInvalid
		v.Reason = "measurement invalid: " + r.InvalidReason
		return v
	}
	lat, err := quantile(r.Latency, s.SLO.Quantile)
	if err != nil {
		v.State = store.TrialInvalid
		v.Reason = err.Error()
		return v
	}
	kind := Objective(s).Kind
	obj := kind.Value(r.QPS, lat)
	// Whether it meets the SLO is objective.Constraints' rule, the one
	// the capacity steps and the search benchmark use; the reasons add
	// what only a real run knows (which errors, why the generator fell
	// behind).
	c := objective.Constraints{SLO: s.SLO.Latency.D(), ErrorBudget: s.SLO.ErrorRate}
	var rate *objective.Rate
	var problems []string
	if kind.OpenLoop() { // feasible only at the offered rate
		if !r.RateKept {
			problems = append(problems, "offered rate not kept: "+r.RateNote)
		} else {
			rate = &objective.Rate{Sent: r.OfferedRate, Achieved: r.QPS, Shortfall: objective.RateShortfall}
		}
	}
	problems = append(breachReasons(c, qname(s.SLO.Quantile), lat, r, rate), problems...)
	v.Objective = &obj
	v.Feasible = len(problems) == 0
	v.State = store.TrialSucceeded
	switch r.StopReason {
	case probe.StopSLOBreach, probe.StopErrorBudget:
		v.State = store.TrialEarlyStopped
		v.Feasible = false
		if len(problems) == 0 {
			problems = append(problems, r.StopDetail)
		}
	}
	if !v.Feasible {
		v.Reason = joinReasons(problems)
	}
	return v
}

func summarize(r *probe.Result) store.Summary {
	return store.Summary{
		Throughput: r.QPS,
		P50:        r.Latency.P50,
		P90:        r.Latency.P90,
		P95:        r.Latency.P95,
		P99:        r.Latency.P99,
		P999:       r.Latency.P999,
		ErrorRate:  r.ErrorRate,
		Requests:   r.Requests,
		MeanBatch:  r.Server.MeanBatchSize,
		QueueShare: r.Server.QueuingShare,
	}
}

func qname(q float64) string {
	if q == 0 {
		q = 0.99
	}
	return "P" + trimFloat(100*q)
}

func trimFloat(f float64) string { return fmt.Sprintf("%g", f) }

func joinReasons(ps []string) string {
	out := ""
	for i, p := range ps {
		if i > 0 {
			out += "; "
		}
		out += p
	}
	return out
}

// topErrors names the most frequent error codes, for reasons.
func topErrors(m map[string]int64) string {
	best, n := "", int64(0)
	for code, c := range m {
		if c > n || (c == n && code < best) {
			best, n = code, c
		}
	}
	if best == "" {
		return "no error codes"
	}
	if len(m) == 1 {
		return fmt.Sprintf("%d %s", n, best)
	}
	return fmt.Sprintf("mostly %d %s", n, best)
}

// breachReasons states each breach of c by probe result r: the latency
// with its quantile's name, the error rate with the errors seen most.
func breachReasons(c objective.Constraints, quantile string, lat time.Duration, r *probe.Result, rate *objective.Rate) []string {
	var out []string
	for _, b := range c.Breaches(lat, r.ErrorRate, rate) {
		why := c.Describe(b, quantile, lat, r.ErrorRate, rate)
		if b == objective.ErrorsOver {
			why += " (" + topErrors(r.Errors) + ")"
		}
		out = append(out, why)
	}
	return out
}
