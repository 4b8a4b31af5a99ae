package objective

import (
	"fmt"
	"time"
)

// RateShortfall is how far below the offered rate an open-loop
// measurement's answers may fall and the rate still count as kept: the
// generator's own pacing has sub-percent error, anything more is the
// server.
const RateShortfall = 0.02

// Breach is one way a measurement fails the constraints that every
// objective's feasible trial meets.
type Breach int

const (
	// LatencyOver: the SLO quantile's latency is over the SLO.
	LatencyOver Breach = iota + 1
	// ErrorsOver: the error rate is over the budget.
	ErrorsOver
	// RateShort: an open-loop measurement answered less than the rate
	// it was offered.
	RateShort
)

// Rate is an open-loop measurement's rate: Sent requests per second (the
// rate offered, as the generator kept it), Achieved answered; Achieved may
// fall short of Sent by the share Shortfall (RateShortfall, plus whatever
// the caller's window costs).
type Rate struct {
	Sent, Achieved, Shortfall float64
}

// Kept reports whether the achieved rate is within the shortfall.
func (r Rate) Kept() bool { return r.Achieved >= r.Sent*(1-r.Shortfall) }

// Constraints are the limits every objective's feasible trial meets: the
// SLO quantile's latency within SLO and the error rate within ErrorBudget,
// and, measured at an open-loop rate (a min_latency trial, a capacity
// step), that rate achieved. One rule for the tuner's trials and capacity
// steps, the simulation's steps and the search benchmark's replayed runs,
// so that what the benchmark grades feasible is what the tuner would.
type Constraints struct {
	SLO         time.Duration
	ErrorBudget float64
}

// Breaches lists how a measurement fails c, in the order LatencyOver,
// ErrorsOver, RateShort: latency is the SLO quantile's, errRate the error
// rate, rate the open-loop rate (nil for a closed loop, which has none to
// keep). None: it meets them.
func (c Constraints) Breaches(latency time.Duration, errRate float64, rate *Rate) []Breach {
	var out []Breach
	if latency > c.SLO {
		out = append(out, LatencyOver)
	}
	if errRate > c.ErrorBudget {
		out = append(out, ErrorsOver)
	}
	if rate != nil && !rate.Kept() {
		out = append(out, RateShort)
	}
	return out
}

// Meets reports whether a measurement has no breach of c (Breaches).
func (c Constraints) Meets(latency time.Duration, errRate float64, rate *Rate) bool {
	return len(c.Breaches(latency, errRate, rate)) == 0
}

// Describe says what breach b of a measurement is: "p99 12ms > SLO 10ms",
// "error rate 0.0200 > budget 0.0100", "achieved 450.0 req/s of 500.0
// sent". quantile names the latency's quantile ("p99").
func (c Constraints) Describe(b Breach, quantile string, latency time.Duration, errRate float64, rate *Rate) string {
	switch b {
	case LatencyOver:
		return fmt.Sprintf("%s %s > SLO %s", quantile, latency.Round(time.Microsecond), c.SLO)
	case ErrorsOver:
		return fmt.Sprintf("error rate %.4f > budget %.4f", errRate, c.ErrorBudget)
	case RateShort:
		if rate != nil {
			return fmt.Sprintf("achieved %.1f req/s of %.1f sent", rate.Achieved, rate.Sent)
		}
	}
	return fmt.Sprintf("breach %d", int(b))
}
