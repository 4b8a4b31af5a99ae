package search

import (
	"fmt"
	"math"
	"time"

	"github.com/batchtune/batchtune/configs"
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

// ObjectiveKind is what a study optimises.
type ObjectiveKind int

const (
	// MaxThroughput maximises achieved QPS at a fixed closed-loop
	// concurrency, subject to P99 ≤ SLO and error rate ≤ budget.
	MaxThroughput ObjectiveKind = iota + 1
	// MinLatency minimises P99 at a fixed open-loop rate, subject to
	// achieving the rate (and error rate ≤ budget).
	MinLatency
)

var objectiveNames = []string{"", "max_throughput", "min_latency"}

func (k ObjectiveKind) String() string {
	if k <= 0 || int(k) >= len(objectiveNames) {
		return fmt.Sprintf("ObjectiveKind(%d)", int(k))
	}
	return objectiveNames[k]
}

// MarshalText writes the objective's name.
func (k ObjectiveKind) MarshalText() ([]byte, error) {
	if k <= 0 || int(k) >= len(objectiveNames) {
		return nil, fmt.Errorf("search: unknown objective %d", int(k))
	}
	return []byte(objectiveNames[k]), nil
}

// UnmarshalText reads max_throughput or min_latency.
func (k *ObjectiveKind) UnmarshalText(b []byte) error {
	for i := 1; i < len(objectiveNames); i++ {
		if objectiveNames[i] == string(b) {
			*k = ObjectiveKind(i)
			return nil
		}
	}
	return fmt.Errorf("search: unknown objective %q; use max_throughput or min_latency", b)
}

// Direction says whether larger or smaller objective values are better.
type Direction int

const (
	Maximize Direction = iota + 1
	Minimize
)

func (d Direction) String() string {
	switch d {
	case Maximize:
		return "maximize"
	case Minimize:
		return "minimize"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Objective is what a study optimises and the constraints a trial must meet
// to be feasible. The SLO itself is in the space's Rules.
type Objective struct {
	Kind ObjectiveKind
	// ErrorBudget is the largest error rate (failed / sent requests) a
	// feasible trial may have, in [0, 1).
	ErrorBudget float64
	// Rate is the open-loop request rate (per second) a MinLatency trial
	// must achieve. Unused for MaxThroughput.
	Rate float64
}

// Direction is Maximize for MaxThroughput (QPS) and Minimize for MinLatency
// (P99).
func (o Objective) Direction() Direction {
	if o.Kind == MinLatency {
		return Minimize
	}
	return Maximize
}

// Better reports whether objective value a is strictly better than b.
func (o Objective) Better(a, b float64) bool {
	if o.Direction() == Minimize {
		return a < b
	}
	return a > b
}

// Validate reports every problem with o, with field paths under objective.
func (o Objective) Validate() error {
	var ps configs.Problems
	switch o.Kind {
	case MaxThroughput, MinLatency:
	default:
		ps.Add("objective.kind", "must be max_throughput or min_latency, got %s", o.Kind)
	}
	if !(o.ErrorBudget >= 0 && o.ErrorBudget < 1) {
		ps.Add("objective.error_budget", "must be in [0, 1), got %v", o.ErrorBudget)
	}
	if o.Kind == MinLatency && !(o.Rate > 0) {
		ps.Add("objective.rate", "min_latency needs the rate to hold, got %v", o.Rate)
	}
	return ps.Err()
}

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
// by how much (log(P99/SLO), log(rate/QPS), the error rate against the
// budget). It agrees in sign with the tuner's Feasible verdict and is
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
		m = math.Log(o.Rate / t.QPS)
	case o.Kind == MaxThroughput && t.P99 > 0 && slo > 0:
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
