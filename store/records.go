package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/batchtune/batchtune/capacity"
)

// Versions of what this batchtune writes. A file or record with a larger
// version is refused with ErrSchemaTooNew, never half-read.
const (
	// LayoutVersion is the bucket layout, kept in the meta bucket.
	LayoutVersion = 1
	// RecordVersion is the encoding of every record, kept in each value.
	RecordVersion = 1
)

// Study is a study as the store keeps it: its name and a snapshot of the
// spec it was last run with.
type Study struct {
	Name string `json:"name"`
	// SpecHash identifies the effective spec (configs.Study.Hash); a run
	// records the hash it ran with, so a changed spec can be told apart.
	SpecHash string `json:"spec_hash"`
	// Spec is the study file as written, comments included.
	Spec    string    `json:"spec"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// RunState is where a run stands.
type RunState string

// Run states. A run is unfinished while running or interrupted: the
// process that ran it stopped (gracefully: interrupted; by a crash: it is
// still running in the store) and a later run of the study resumes it.
const (
	RunRunning     RunState = "running"
	RunFinished    RunState = "finished"
	RunInterrupted RunState = "interrupted"
	RunFailed      RunState = "failed"
	// RunCancelled: stopped on request (the daemon's API); not resumed.
	RunCancelled RunState = "cancelled"
)

// Valid reports whether s is a known run state.
func (s RunState) Valid() bool {
	switch s {
	case RunRunning, RunFinished, RunInterrupted, RunFailed, RunCancelled:
		return true
	}
	return false
}

// Unfinished reports whether a run in state s is to be resumed.
func (s RunState) Unfinished() bool { return s == RunRunning || s == RunInterrupted }

// RunKind says what started a run.
type RunKind string

// Run kinds.
const (
	KindOneShot   RunKind = "oneshot"   // batchtune tune
	KindScheduled RunKind = "scheduled" // the daemon's schedule (and, before kind api, its API)
	KindAPI       RunKind = "api"       // queued through the daemon's API
)

// Valid reports whether k is a known run kind.
func (k RunKind) Valid() bool { return k == KindOneShot || k == KindScheduled || k == KindAPI }

// Daemon reports whether a daemon ran it (scheduled or through its API):
// a re-tune, warm-started unless the API asked otherwise.
func (k RunKind) Daemon() bool { return k == KindScheduled || k == KindAPI }

// Outcome is how a finished run ended: a bounded set, fit for a metric
// label.
type Outcome string

// Outcomes.
const (
	OutcomeNone        Outcome = ""            // not finished
	OutcomeRecommended Outcome = "recommended" // a configuration was recommended (and, scheduled, accepted)
	OutcomeKept        Outcome = "kept"        // the incumbent was kept: nothing beat it by the margin
	OutcomeNoFeasible  Outcome = "no_feasible" // no configuration met the SLO
	OutcomeError       Outcome = "error"       // the run failed; Run.Detail says why
	OutcomeCancelled   Outcome = "cancelled"   // stopped on request; Run.Detail says by whom
)

// Valid reports whether o is a known outcome.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeNone, OutcomeRecommended, OutcomeKept, OutcomeNoFeasible, OutcomeError, OutcomeCancelled:
		return true
	}
	return false
}

// Run is one execution of a study: a one-shot tune or one scheduled
// re-tune.
type Run struct {
	Study string `json:"study"`
	// ID numbers the study's runs from 1 in the order they were created.
	ID       uint64    `json:"id"`
	Kind     RunKind   `json:"kind"`
	State    RunState  `json:"state"`
	SpecHash string    `json:"spec_hash"`
	Started  time.Time `json:"started"`
	// Ended is zero while the run is unfinished.
	Ended time.Time `json:"ended,omitzero"`
	// Budget is the trial budget the run was started with.
	Budget  int     `json:"budget,omitempty"`
	Outcome Outcome `json:"outcome,omitempty"`
	// Detail says in words why the run ended as it did.
	Detail string `json:"detail,omitempty"`
	// Recommendation is the Seq of the run's recommendation in the
	// study's history; 0 when it made none.
	Recommendation uint64 `json:"recommendation,omitempty"`
	// Exported lists the files the run's recommendation was exported to;
	// empty when it exported nothing (or its export failed).
	Exported []string `json:"exported,omitempty"`
	// Degradation is, for a warm-started run that re-measured the
	// incumbent, the incumbent's relative loss of objective since it was
	// accepted (positive is worse); nil when the run measured none.
	// Degraded is set when it broke the study's threshold or the SLO. Kept
	// here so that the alarm outlives the daemon that raised it.
	Degradation *float64 `json:"degradation,omitempty"`
	Degraded    bool     `json:"degraded,omitempty"`
	// Stability is how steady the machine was during the run; nil for a
	// run that ended before it was judged.
	Stability *Stability `json:"stability,omitempty"`
}

// Stability is what a run saw of the machine's steadiness: the spread of
// the baseline's confirmation repeats, the CPU time a hypervisor stole
// and the load average. Each figure is nil when it could not be measured.
type Stability struct {
	// BaselineCV is the coefficient of variation (standard deviation /
	// mean) of the baseline's objective over BaselineRepeats repeats.
	BaselineCV      *float64 `json:"baseline_cv,omitempty"`
	BaselineRepeats int      `json:"baseline_repeats,omitempty"`
	// Steal is the share of the machine's CPU time stolen over the run.
	Steal *float64 `json:"steal,omitempty"`
	// LoadPerCore is the one-minute load average at the run's end over
	// the machine's cores.
	LoadPerCore *float64 `json:"load_per_core,omitempty"`
	// Unstable is set when a figure passed its limit; Note says which,
	// and what to do.
	Unstable bool   `json:"unstable,omitempty"`
	Note     string `json:"note,omitempty"`
}

// LastIncumbentCheck returns the latest finished run of runs (in ID
// order, as Runs returns them) that re-measured the incumbent, or nil:
// its Degraded and Degradation are what is known of the incumbent's
// health now.
func LastIncumbentCheck(runs []Run) *Run {
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].State == RunFinished && runs[i].Degradation != nil {
			return &runs[i]
		}
	}
	return nil
}

// TrialState is where a trial stands in the tuner's lifecycle.
type TrialState string

// Trial states: suggested → rejected | starting → warming → measuring →
// succeeded | failed | early-stopped | invalid, and interrupted from any
// unfinished state.
const (
	TrialSuggested    TrialState = "suggested"
	TrialRejected     TrialState = "rejected" // a hard rule forbade running it
	TrialStarting     TrialState = "starting"
	TrialWarming      TrialState = "warming"
	TrialMeasuring    TrialState = "measuring"
	TrialSucceeded    TrialState = "succeeded"
	TrialFailed       TrialState = "failed"        // start failure, crash, readiness timeout
	TrialEarlyStopped TrialState = "early-stopped" // certain SLO breach
	TrialInvalid      TrialState = "invalid"       // the load generator was the bottleneck
	TrialInterrupted  TrialState = "interrupted"   // the study stopped mid-trial
)

// TrialStates lists every trial state in lifecycle order.
var TrialStates = []TrialState{
	TrialSuggested, TrialRejected, TrialStarting, TrialWarming, TrialMeasuring,
	TrialSucceeded, TrialFailed, TrialEarlyStopped, TrialInvalid, TrialInterrupted,
}

// Valid reports whether s is a known trial state.
func (s TrialState) Valid() bool {
	for _, v := range TrialStates {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether s is final: a trial in it is never changed.
func (s TrialState) Terminal() bool {
	switch s {
	case TrialRejected, TrialSucceeded, TrialFailed, TrialEarlyStopped, TrialInvalid, TrialInterrupted:
		return true
	}
	return false
}

// Roles of a trial in its run.
const (
	RoleSearch    = "search"    // proposed by the search strategy
	RoleConfirm   = "confirm"   // a re-measurement of a top candidate
	RoleBaseline  = "baseline"  // a measurement of the baseline configuration
	RoleIncumbent = "incumbent" // a warm start's re-measurement of the incumbent
	RoleReference = "reference" // the baseline measured on one node, to compare the nodes of parallel trials
)

// Param is one parameter's value in a configuration, by TF Serving name.
type Param struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Phase records when a trial entered a state.
type Phase struct {
	State TrialState `json:"state"`
	At    time.Time  `json:"at"`
}

// Summary holds the figures of a trial that tables and reports show. The
// full measurement is Trial.Measurement.
type Summary struct {
	Throughput float64       `json:"throughput,omitempty"` // achieved requests/s
	P50        time.Duration `json:"p50,omitempty"`
	P90        time.Duration `json:"p90,omitempty"`
	P95        time.Duration `json:"p95,omitempty"`
	P99        time.Duration `json:"p99,omitempty"`
	P999       time.Duration `json:"p999,omitempty"`
	ErrorRate  float64       `json:"error_rate,omitempty"`
	Requests   int64         `json:"requests,omitempty"`
	// MeanBatch and QueueShare come from the server's metrics: the mean
	// processed batch size and the share of latency spent queueing.
	MeanBatch  float64 `json:"mean_batch,omitempty"`
	QueueShare float64 `json:"queue_share,omitempty"`
}

// Trial is one configuration tried in a run.
type Trial struct {
	Study string `json:"study"`
	Run   uint64 `json:"run"`
	// Seq numbers the run's trials from 1 in the order they were added;
	// listing a run's trials returns them in this order.
	Seq  uint64 `json:"seq"`
	Role string `json:"role,omitempty"`
	// Config is the configuration in the space's declared order.
	Config []Param    `json:"config"`
	State  TrialState `json:"state"`
	Reason string     `json:"reason,omitempty"`
	// Node is the machine the trial's server ran on, when the runtime
	// knows it (a Kubernetes node); parallel trials run on several.
	Node string `json:"node,omitempty"`
	// LogTail is the end of the server's log when the trial failed.
	LogTail string  `json:"log_tail,omitempty"`
	Phases  []Phase `json:"phases,omitempty"`
	// Objective is the trial's objective value; nil when nothing was
	// measured.
	Objective *float64 `json:"objective,omitempty"`
	Feasible  bool     `json:"feasible"`
	Summary   Summary  `json:"summary,omitzero"`
	// Expected is the relative improvement the search strategy expected
	// when it suggested the configuration (nil when it has no model), and
	// Why its word for the choice (recipe, expected-improvement, ...):
	// the stopping rule and a reader of the history both need them.
	Expected *float64 `json:"expected,omitempty"`
	Why      string   `json:"why,omitempty"`
	// Capacity is, for a trial under objective max_capacity, its search
	// for the highest rate within the SLO: the bracket and every step
	// measured (offered and achieved rate, quantiles, errors, mean batch,
	// queueing share), which together are the server's rate–latency
	// curve, the knee included. Nil under the other objectives. Records
	// written before it existed read as nil.
	Capacity *capacity.Result `json:"capacity,omitempty"`
	// Measurement is the probe's full result as JSON; the store keeps it
	// as it is and never interprets it. It is stored beside the trial:
	// DB.Trial returns it, listings (Trials, StudyTrials, ResumeRun) leave
	// it out, and a put with none keeps the one stored.
	Measurement json.RawMessage `json:"measurement,omitempty"`
}

// measurementRecord is how a trial's measurement is stored.
type measurementRecord struct {
	Measurement json.RawMessage `json:"measurement"`
}

// Transition sets t's state and records when it entered it.
func (t *Trial) Transition(s TrialState, at time.Time) {
	t.State = s
	t.Phases = append(t.Phases, Phase{State: s, At: at})
}

// Recommendation is one entry of a study's recommendation history.
type Recommendation struct {
	Study string `json:"study"`
	// Seq numbers the study's recommendations from 1.
	Seq  uint64    `json:"seq"`
	Run  uint64    `json:"run"`
	Time time.Time `json:"time"`
	// Config is the recommended configuration; Batching is it as a
	// batching.config file and Flags as the server flags that go with it.
	Config    []Param  `json:"config"`
	Batching  string   `json:"batching"`
	Flags     []string `json:"flags,omitempty"`
	Objective float64  `json:"objective"`
	// Gain is the relative improvement over Baseline (0.12 is 12% better),
	// with its confidence interval [GainLow, GainHigh] at Confidence.
	Gain       float64 `json:"gain"`
	GainLow    float64 `json:"gain_low"`
	GainHigh   float64 `json:"gain_high"`
	Confidence float64 `json:"confidence,omitempty"`
	// Baseline names what the gain is measured against: "tf-defaults",
	// "production" or "incumbent".
	Baseline string `json:"baseline,omitempty"`
	// Capacity is the highest open-loop rate (req/s) the recommended
	// configuration sustains within the SLO, with its confidence interval
	// [CapacityLow, CapacityHigh] at Confidence; zero when the run did not
	// measure capacity (objective max_throughput or min_latency). Fleets
	// are sized on CapacityLow (package capacity's Replicas).
	Capacity     float64 `json:"capacity,omitempty"`
	CapacityLow  float64 `json:"capacity_low,omitempty"`
	CapacityHigh float64 `json:"capacity_high,omitempty"`
	// CapacityRepeats is how many confirmation repeats measured the
	// recommended configuration's capacity, CapacityFloors how many of
	// them measured only a lower bound (CapacityEstimate.Floors).
	CapacityRepeats int `json:"capacity_repeats,omitempty"`
	CapacityFloors  int `json:"capacity_floors,omitempty"`
	// Capacities are the confirmed capacities of the configurations the
	// run compared the recommendation with (the baseline, the seeds'
	// recipe, the other candidates), for planning; empty when the run did
	// not measure capacity.
	Capacities []CapacityEstimate `json:"capacities,omitempty"`
	// Accepted is true when the configuration was exported (and rolled
	// out); false when it was recorded but the incumbent was kept.
	Accepted bool   `json:"accepted"`
	Note     string `json:"note,omitempty"`
}

// CapacityEstimate is one configuration's capacity as a run's
// confirmation measured it: the geometric mean of its repeats (req/s) and
// its interval [Low, High] at the recommendation's Confidence.
type CapacityEstimate struct {
	// Label names the configuration as the confirmation did: "baseline
	// (tf-defaults)", "seed recipe", "trial 12".
	Label    string  `json:"label"`
	Config   []Param `json:"config,omitempty"`
	Capacity float64 `json:"capacity"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	// Repeats is how many repeats measured it, Feasible how many of them
	// met the SLO at some rate.
	Repeats  int `json:"repeats"`
	Feasible int `json:"feasible"`
	// Floors is how many of them measured only a lower bound: the load
	// generator could not offer a higher rate (capacity.Result.Floor).
	Floors int `json:"floors,omitempty"`
}

// key encodes a sequence number as 8 big-endian bytes, so that a bucket's
// cursor order is numeric order.
func key(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}

// seqOf decodes a key written by key.
func seqOf(k []byte) (uint64, bool) {
	if len(k) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k), true
}

// envelope carries the record version in every value.
type envelope struct {
	Schema int `json:"schema"`
}

// versionPrefix starts every value encode writes.
var versionPrefix = []byte(`{"schema":`)

// peekVersion reads the record version. Values written by encode start
// with it and are read without scanning the rest (a trial's measurement
// can be large); anything else is decoded in full.
func peekVersion(data []byte) (envelope, error) {
	if rest, ok := bytes.CutPrefix(data, versionPrefix); ok {
		n := 0
		for n < len(rest) && n < 9 && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n > 0 && n < len(rest) && (rest[n] == ',' || rest[n] == '}') {
			v, err := strconv.Atoi(string(rest[:n]))
			if err == nil {
				return envelope{Schema: v}, nil
			}
		}
	}
	var env envelope
	err := json.Unmarshal(data, &env)
	return env, err
}

// encode writes v with the current record version as its first field.
func encode(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("store: record %T does not encode as an object", v)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"schema":%d`, RecordVersion)
	if len(body) > 2 {
		b.WriteByte(',')
	}
	b.Write(body[1:])
	return b.Bytes(), nil
}

// decode reads a value written by encode into v, refusing newer versions.
// what names the record in errors ("trial 3 of run 2 of study s"). The
// data is copied, so v stays valid after the transaction ends.
func decode(data []byte, what string, v any) error {
	env, err := peekVersion(data)
	if err != nil {
		return fmt.Errorf("%w: %s does not decode: %v", ErrCorrupt, what, err)
	}
	switch {
	case env.Schema > RecordVersion:
		return fmt.Errorf("%w: %s has record version %d; this batchtune reads up to %d: upgrade batchtune", ErrSchemaTooNew, what, env.Schema, RecordVersion)
	case env.Schema < 1:
		return fmt.Errorf("%w: %s has no record version", ErrCorrupt, what)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s does not decode: %v", ErrCorrupt, what, err)
	}
	return nil
}
