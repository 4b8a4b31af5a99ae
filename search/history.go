package search

import (
	"fmt"
	"math"
	"time"

	"github.com/batchtune/batchtune/objective"
)

// Outcome is how a trial ended, as the tuner records it (katib's trial
// conditions, with the unhappy ones spelled out).
type Outcome int

const (
	// Succeeded: measured to the end; Value, P99, ErrorRate, QPS are real.
	Succeeded Outcome = iota + 1
	// Failed: the server did not start, crashed or never became ready
	// (e.g. max_batch_size beyond device memory). Nothing was measured.
	Failed
	// EarlyStopped: the measurement stopped once the SLO was certainly
	// broken; P99 and ErrorRate are what was seen until then.
	EarlyStopped
	// Rejected: a hard rule forbade running it (Space.Check).
	Rejected
	// Invalid: it ran but the measurement does not count (the load
	// generator was the bottleneck).
	Invalid
	// Interrupted: the study stopped mid-trial; it will be run again.
	Interrupted
)

var outcomeNames = []string{"", "succeeded", "failed", "early_stopped", "rejected", "invalid", "interrupted"}

func (o Outcome) String() string {
	if o <= 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// MarshalText writes the outcome's name.
func (o Outcome) MarshalText() ([]byte, error) {
	if o <= 0 || int(o) >= len(outcomeNames) {
		return nil, fmt.Errorf("search: unknown outcome %d", int(o))
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText reads an outcome's name.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i := 1; i < len(outcomeNames); i++ {
		if outcomeNames[i] == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("search: unknown outcome %q", b)
}

// finished reports whether a trial with this outcome counts as done: its
// configuration is not suggested again. Only an interrupted trial is not
// (the tuner runs it again).
func (o Outcome) finished() bool { return o != Interrupted && o != 0 }

// ran reports whether the trial cost a server restart.
func (o Outcome) ran() bool {
	return o == Succeeded || o == Failed || o == EarlyStopped || o == Invalid
}

// ObjectiveKind, Direction and Objective are package objective's: what a
// study optimises, which way is better, and the constraints a trial must
// meet to be feasible (the SLO itself is in the space's Rules).
type (
	ObjectiveKind = objective.Kind
	Direction     = objective.Direction
	Objective     = objective.Objective
)

const (
	MaxThroughput = objective.MaxThroughput
	MinLatency    = objective.MinLatency
	MaxCapacity   = objective.MaxCapacity
	Maximize      = objective.Maximize
	Minimize      = objective.Minimize
)

// Trial is one history entry: what the tuner knows about a configuration it
// suggested, ran or refused.
type Trial struct {
	Config  Config  `json:"config"`
	Outcome Outcome `json:"outcome"`
	// Value is the objective as measured (QPS for MaxThroughput, P99 in
	// seconds for MinLatency); meaningful only when Measured.
	Value    float64 `json:"value"`
	Measured bool    `json:"measured"`
	// Feasible is the tuner's verdict: the trial met the SLO and error
	// budget (and, for MinLatency, achieved the rate).
	Feasible bool `json:"feasible"`
	// P99, ErrorRate and QPS are what was measured (zero when nothing was).
	P99       time.Duration `json:"p99"`
	ErrorRate float64       `json:"error_rate"`
	QPS       float64       `json:"qps"`
	// Expected is the relative improvement over the best feasible trial the
	// strategy expected when it suggested this configuration (see
	// Suggestion.Expected); nil when the strategy gives none.
	Expected *float64 `json:"expected,omitempty"`
}

// failedMargin is the constraint margin given to a trial that ran but
// measured nothing: clearly infeasible, on the same log scale as measured
// margins.
const failedMargin = 1.0

// margin is a trial's constraint margin on a log scale: negative when the
// trial met every constraint, positive when it broke one, its size saying
// by how much (log(P99/SLO); for min_latency the larger of that and
// log(rate/QPS); the error rate against the budget). It agrees in sign
// with the tuner's Feasible verdict and is
// clipped to [-2, 2]. ok is false when the trial tells nothing about
// feasibility (rejected, invalid, interrupted).
func margin(o Objective, slo time.Duration, t Trial) (m float64, ok bool) {
	switch t.Outcome {
	case Succeeded, EarlyStopped:
	case Failed:
		return failedMargin, true
	default:
		return 0, false
	}
	// The latency (or rate) part decides; without it the verdict alone does.
	m = -failedMargin
	if !t.Feasible {
		m = failedMargin
	}
	switch {
	case o.Kind == MinLatency && t.QPS > 0:
		// Both bind: the rate and, as for every objective, the SLO
		// (objective.Constraints).
		m = math.Log(o.Rate / t.QPS)
		if t.P99 > 0 && slo > 0 {
			m = math.Max(m, math.Log(float64(t.P99)/float64(slo)))
		}
	case (o.Kind == MaxThroughput || o.Kind == MaxCapacity) && t.P99 > 0 && slo > 0:
		// For a capacity trial, P99 is the knee's (the highest rate that
		// met the SLO), or the lowest rate's when none met.
		m = math.Log(float64(t.P99) / float64(slo))
	}
	if t.ErrorRate >= 0 { // NaN: no error-rate information
		m = math.Max(m, (t.ErrorRate-o.ErrorBudget)/math.Max(o.ErrorBudget, 0.01))
	}
	const edge = 0.05
	feasible := t.Feasible && t.Outcome == Succeeded
	if feasible && m > -edge {
		m = -edge
	}
	if !feasible && m < edge {
		m = edge
	}
	return math.Max(-2, math.Min(2, m)), true
}
