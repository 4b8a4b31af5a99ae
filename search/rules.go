package search

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/tfserving"
)

// Rules are the study facts a space is searched under: the hard rules every
// configuration must obey before it is run, and the machine facts the soft
// prior and the starting points are derived from.
type Rules struct {
	// SLO is the P99 latency target. Hard rule: batch_timeout_micros must
	// stay strictly below SLO/3 (a request may wait one timeout, then one
	// batch execution, then its own).
	SLO time.Duration
	// Cores is the number of CPU cores the server sees (TF's default
	// num_batch_threads; the soft intra × inter prior).
	Cores int
	// GPUs is the number of accelerators (0 for a CPU-only server). The
	// seeds' recipe sets num_batch_threads to it (at least 1).
	GPUs int
	// Bounds are the user's hard limits on parameter values, on top of the
	// space's own values (for example a max_batch_size known to fit memory).
	Bounds []Bound
	// Base is the fixed part of batching.config (fields the space does not
	// tune); nil means TF Serving's defaults. Tuned fields override it.
	Base *tfserving.BatchingParameters
	// InFlight is the number of rows a closed-loop load keeps in the
	// server (load.concurrency × rows per request); 0 when the value is
	// not measured at a fixed concurrency (objective.Kind.HoldsConcurrency:
	// an open-loop load, or max_capacity's rate steps). No batch can hold
	// more (structure.go).
	InFlight int
	// Burst is the rows of the closed-loop burst that starts a
	// max_capacity trial's search (load.concurrency × rows per request);
	// 0 otherwise. It is the user's guess of what the server holds near
	// its capacity, not a fact, so it only places starting points
	// (Bayes.BurstStarts) and never caps a model input.
	Burst int
	// Fixed holds server flags the study pins outside the space
	// (target.flags, see PinnedFlags), e.g. grpc_max_threads.
	Fixed map[string]int64
}

// Bound limits one parameter's value to [Min, Max]; a nil end is open.
type Bound struct {
	Name string `json:"name"`
	Min  *int64 `json:"min,omitempty"`
	Max  *int64 `json:"max,omitempty"`
}

// Rule names carried by a Violation.
const (
	// RuleSLOTimeout: batch_timeout_micros must be below SLO/3.
	RuleSLOTimeout = "slo_timeout"
	// RuleTFValidity: TF Serving would refuse the configuration at load.
	RuleTFValidity = "tf_validity"
	// RuleUserBound: a value lies outside the user's bounds.
	RuleUserBound = "user_bound"
	// RuleMalformed: the configuration does not name the space's parameters.
	RuleMalformed = "malformed"
)

// Violation is one hard rule a configuration breaks: the rule's name, the
// parameter concerned and a reason a person can act on. The tuner records a
// configuration with violations as rejected and never runs it.
type Violation struct {
	Rule   string `json:"rule"`
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (v Violation) String() string { return v.Rule + ": " + v.Field + ": " + v.Reason }

// Violations is every hard rule one configuration breaks. Empty means the
// configuration may be run.
type Violations []Violation

// Err returns vs as an error wrapping ErrRejected, or nil when empty.
func (vs Violations) Err() error {
	if len(vs) == 0 {
		return nil
	}
	return rejection(vs)
}

type rejection Violations

func (r rejection) Error() string {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = v.String()
	}
	return ErrRejected.Error() + ": " + strings.Join(parts, "; ")
}

func (r rejection) Unwrap() error { return ErrRejected }

// validate reports problems with the rules themselves.
func (r Rules) validate(ps *configs.Problems) {
	if r.SLO <= 0 {
		ps.Add("slo", "must be positive, got %s", r.SLO)
	}
	if r.Cores < 1 {
		ps.Add("cores", "must be at least 1, got %d", r.Cores)
	}
	if r.GPUs < 0 {
		ps.Add("gpus", "must not be negative, got %d", r.GPUs)
	}
	for i, b := range r.Bounds {
		field := "bounds[" + strconv.Itoa(i) + "]"
		if _, ok := lookupParam(b.Name); !ok {
			ps.Add(field+".name", "unknown parameter %q; known: %s", b.Name, knownNames())
		}
		if b.Min == nil && b.Max == nil {
			ps.Add(field, "needs min or max")
		}
		if b.Min != nil && b.Max != nil && *b.Min > *b.Max {
			ps.Add(field, "min %d is above max %d", *b.Min, *b.Max)
		}
	}
	if r.Base != nil {
		if err := configs.ValidateBatching(r.Base); err != nil {
			for _, p := range err.(configs.Problems) {
				ps.Add("base."+p.Field, "%s", p.Msg)
			}
		}
	}
}

// sloTimeoutOK reports whether timeout µs is strictly below SLO/3, exactly
// (no rounding of SLO/3).
func (r Rules) sloTimeoutOK(timeoutMicros int64) bool {
	return 3*timeoutMicros*int64(time.Microsecond) < int64(r.SLO)
}

func (r Rules) sloTimeoutReason(timeoutMicros int64) string {
	return fmt.Sprintf("%d µs is not below SLO/3 = %s (SLO %s)", timeoutMicros, r.SLO/3, r.SLO)
}

// boundOK reports whether v satisfies every bound on name, and the reason
// when it does not.
func (r Rules) boundOK(name string, v int64) (bool, string) {
	for _, b := range r.Bounds {
		if b.Name != name {
			continue
		}
		if b.Min != nil && v < *b.Min {
			return false, fmt.Sprintf("%d is below the bound min %d", v, *b.Min)
		}
		if b.Max != nil && v > *b.Max {
			return false, fmt.Sprintf("%d is above the bound max %d", v, *b.Max)
		}
	}
	return true, ""
}

// SetClosedLoop records a closed-loop load of rows requests in flight for
// objective k: the rows in the server when k's value is measured with them
// held (InFlight), else the burst's guess (Burst).
func (r *Rules) SetClosedLoop(k objective.Kind, rows int) {
	if k.HoldsConcurrency() {
		r.InFlight = rows
		return
	}
	r.Burst = rows
}
