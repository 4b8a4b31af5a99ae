package objective

import (
	"fmt"
	"strings"
	"time"

	"github.com/batchtune/batchtune/internal/problem"
)

// Kind is what a study optimises. Its text form is the name a study gives
// (objective: max_throughput).
type Kind int

const (
	// MaxThroughput maximises achieved QPS at a fixed closed-loop
	// concurrency, subject to P99 ≤ SLO and error rate ≤ budget.
	MaxThroughput Kind = iota + 1
	// MinLatency minimises P99 at a fixed open-loop rate, subject to
	// achieving the rate, P99 ≤ SLO and error rate ≤ budget (Constraints:
	// the SLO binds every objective).
	MinLatency
	// MaxCapacity maximises the highest open-loop rate at which the
	// server meets the SLO (package capacity's search), the figure fleets
	// are sized with.
	MaxCapacity
)

// Direction says whether larger or smaller objective values are better.
type Direction int

const (
	Maximize Direction = iota + 1
	Minimize
)

// Better reports whether value a is strictly better than b in direction d.
func (d Direction) Better(a, b float64) bool {
	if d == Minimize {
		return a < b
	}
	return a > b
}

func (d Direction) String() string {
	switch d {
	case Maximize:
		return "maximize"
	case Minimize:
		return "minimize"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// kind is one objective's entry.
type kind struct {
	name      string
	direction Direction
	// openLoop: measured at a fixed open-loop rate, which a feasible
	// trial must achieve; otherwise at a fixed closed-loop concurrency.
	openLoop bool
	// holdsConcurrency: the value is measured with load.concurrency
	// requests held in flight the whole time.
	holdsConcurrency bool
	// wrongLoad says why the other load shape will not do.
	wrongLoad string
	// doc is the study reference's line for it.
	doc string
}

// kinds is indexed by Kind; entry 0 is no objective.
var kinds = []kind{
	{},
	MaxThroughput: {name: "max_throughput", direction: Maximize, holdsConcurrency: true,
		wrongLoad: "a closed-loop load (load.mode: closed): at a fixed open-loop rate the throughput is fixed too",
		doc:       "max_throughput (at load.mode closed, subject to the SLO)"},
	MinLatency: {name: "min_latency", direction: Minimize, openLoop: true,
		wrongLoad: "an open-loop load (load.mode: open with load.rate): in a closed loop a slower server is sent fewer requests",
		doc:       "min_latency\n(at load.mode open, subject to achieving load.rate within the SLO)"},
	MaxCapacity: {name: "max_capacity", direction: Maximize,
		wrongLoad: "a closed-loop load (load.mode: closed): its concurrency sizes the short burst that starts the search for the highest rate",
		doc:       "max_capacity\n(the highest open-loop rate within the SLO, searched from a burst at load.concurrency)"},
}

// Known reports whether k is a declared objective.
func (k Kind) Known() bool { return k > 0 && int(k) < len(kinds) }

// Kinds lists every objective in declared order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds)-1)
	for k := Kind(1); k.Known(); k++ {
		out = append(out, k)
	}
	return out
}

// Names lists every objective's name in declared order.
func Names() []string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, k.String())
	}
	return out
}

// Doc describes every objective, for the study reference.
func Doc() string {
	var docs []string
	for _, k := range Kinds() {
		docs = append(docs, kinds[k].doc)
	}
	return strings.Join(docs, " or ") + "."
}

// Parse returns the objective a study names.
func Parse(name string) (Kind, error) {
	var k Kind
	err := k.UnmarshalText([]byte(name))
	return k, err
}

func (k Kind) String() string {
	if !k.Known() {
		return fmt.Sprintf("ObjectiveKind(%d)", int(k))
	}
	return kinds[k].name
}

// MarshalText writes the objective's name.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Known() {
		return nil, fmt.Errorf("objective: unknown objective %d", int(k))
	}
	return []byte(kinds[k].name), nil
}

// UnmarshalText reads an objective's name.
func (k *Kind) UnmarshalText(b []byte) error {
	for _, c := range Kinds() {
		if kinds[c].name == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("objective: unknown objective %q; use %s", b, orList(Names()))
}

// Direction says which way k's values are better.
func (k Kind) Direction() Direction {
	if !k.Known() {
		return Maximize
	}
	return kinds[k].direction
}

// OpenLoop reports whether k is measured at a fixed open-loop rate, which a
// feasible trial must achieve (min_latency), rather than at a fixed
// closed-loop concurrency (max_throughput).
func (k Kind) OpenLoop() bool { return k.Known() && kinds[k].openLoop }

// HoldsConcurrency reports whether k's value is measured with
// load.concurrency requests held in flight the whole time (max_throughput),
// so that the rows in the server are known before any trial runs. Under
// max_capacity the concurrency only sizes the burst that starts the search;
// the value is measured at open-loop rates, where the rows in the server
// follow the latency (Little's law) and are not known in advance.
func (k Kind) HoldsConcurrency() bool { return k.Known() && kinds[k].holdsConcurrency }

// CheckLoad returns why k cannot be measured under a load of the given
// shape ("max_throughput needs a closed-loop load ..."), or "" when it can.
func (k Kind) CheckLoad(openLoop bool) string {
	if !k.Known() || openLoop == kinds[k].openLoop {
		return ""
	}
	return kinds[k].name + " needs " + kinds[k].wrongLoad
}

// Value is k's value of a measurement: the achieved QPS (max_throughput),
// the latency of the SLO's quantile in seconds (min_latency), or, for
// max_capacity, qps is the highest rate its search found within the SLO
// (0 when none met it: an infeasible trial) and is the value itself.
func (k Kind) Value(qps float64, latency time.Duration) float64 {
	if k.OpenLoop() {
		return latency.Seconds()
	}
	return qps
}

// Format renders value v of k in its unit: "1234.5 req/s", or the latency
// named by its quantile ("p99 1.234ms").
func (k Kind) Format(v float64, quantile string) string {
	if k.Direction() == Maximize {
		return fmt.Sprintf("%.1f req/s", v)
	}
	return quantile + " " + Seconds(v)
}

// Cell renders value v of k for a table whose header names the unit:
// requests/s to one decimal, or a latency as a duration.
func (k Kind) Cell(v float64) string {
	if k.Direction() == Maximize {
		return fmt.Sprintf("%.1f", v)
	}
	return Seconds(v)
}

// Seconds renders a latency value (seconds) as a duration to the
// microsecond.
func Seconds(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(time.Microsecond).String()
}

// Objective is what a study optimises and the constraints a trial must meet
// to be feasible. The SLO itself is in the search space's Rules.
type Objective struct {
	Kind Kind
	// ErrorBudget is the largest error rate (failed / sent requests) a
	// feasible trial may have, in [0, 1).
	ErrorBudget float64
	// Rate is the open-loop request rate (per second) a MinLatency trial
	// must achieve. Unused for MaxThroughput.
	Rate float64
}

// Direction is Maximize for MaxThroughput (QPS) and Minimize for MinLatency
// (P99).
func (o Objective) Direction() Direction { return o.Kind.Direction() }

// Better reports whether objective value a is strictly better than b.
func (o Objective) Better(a, b float64) bool { return o.Direction().Better(a, b) }

// Validate reports every problem with o, with field paths under objective.
func (o Objective) Validate() error {
	var ps problem.List
	if !o.Kind.Known() {
		ps.Add("objective.kind", "must be %s, got %s", orList(Names()), o.Kind)
	}
	if !(o.ErrorBudget >= 0 && o.ErrorBudget < 1) {
		ps.Add("objective.error_budget", "must be in [0, 1), got %v", o.ErrorBudget)
	}
	if o.Kind.OpenLoop() && !(o.Rate > 0) {
		ps.Add("objective.rate", "%s needs the rate to hold, got %v", o.Kind, o.Rate)
	}
	return ps.Err()
}

// orList writes names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
