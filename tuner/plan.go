package tuner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/store"
)

// A plan sizes a fleet from a recommendation's confirmed capacities, the
// way seed 001 §3.3 does by hand: each server is loaded to headroom × the
// lower bound of its capacity interval, and the target traffic divided by
// that is the number of servers. The recommendation is compared with the
// baseline and TF's defaults so that the saving of the tuning is a number
// of servers.

// Bounds of a plan's inputs.
const (
	// MaxTargetQPS bounds --target-qps: a trillion requests a second is
	// beyond any fleet, and a typo.
	MaxTargetQPS = 1e12
)

// ErrNoCapacity says a recommendation carries no capacity: its run used
// another objective.
var ErrNoCapacity = errors.New("tuner: the recommendation has no measured capacity")

// ErrBadPlan wraps a plan input out of range; the message names the input.
var ErrBadPlan = errors.New("tuner: bad plan input")

// PlanRow is one configuration of a plan.
type PlanRow struct {
	// Label names the configuration: "recommended", "baseline
	// (tf-defaults)", "seed recipe", "trial 7".
	Label  string        `json:"label"`
	Config []store.Param `json:"config,omitempty"`
	Role   string        `json:"role"` // recommended, baseline, tf-defaults or candidate
	// Capacity is the geometric mean of its confirmation repeats, [Low,
	// High] its interval (req/s); PerServer is Low × headroom, the rate
	// each server is planned to carry.
	Capacity  float64 `json:"capacity"`
	Low       float64 `json:"capacity_low"`
	High      float64 `json:"capacity_high"`
	PerServer float64 `json:"per_server"`
	// Replicas is the number of servers the target needs; 0 with Note set
	// when it cannot be computed (no rate met the SLO, not measured, an
	// interval too wide to plan on).
	Replicas int `json:"replicas"`
	Repeats  int `json:"repeats,omitempty"`
	// Floors is how many repeats measured only a lower bound (the load
	// generator could not offer more): the server may carry more than
	// planned.
	Floors int    `json:"floors,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Plan is a fleet plan for one recommendation.
type Plan struct {
	Study          string  `json:"study"`
	Run            uint64  `json:"run"`
	Recommendation uint64  `json:"recommendation"`
	TargetQPS      float64 `json:"target_qps"`
	Headroom       float64 `json:"headroom"`
	// Confidence is the level of the capacity intervals.
	Confidence float64 `json:"confidence,omitempty"`
	// Rows: the recommendation first, then what it was compared with.
	Rows []PlanRow `json:"rows"`
	// Saved is the servers the recommendation saves against the baseline
	// (SavedShare of the baseline's), and SavedVsDefaults against TF's
	// defaults; nil when that one has no replica count.
	Saved           *int     `json:"saved,omitempty"`
	SavedShare      *float64 `json:"saved_share,omitempty"`
	SavedVsDefaults *int     `json:"saved_vs_defaults,omitempty"`
	Note            string   `json:"note,omitempty"`
}

// labelDefaults is the confirmation's label of a tf-defaults baseline.
const labelDefaults = "baseline (tf-defaults)"

// CheckPlanInputs reports a target or headroom out of range, naming the
// flag (or query parameter) given as flagTarget / flagHeadroom.
func CheckPlanInputs(target, headroom float64, flagTarget, flagHeadroom string) error {
	switch {
	case !(target > 0 && target <= MaxTargetQPS):
		return fmt.Errorf("%w: %s must be a rate in (0, %g] req/s, got %g", ErrBadPlan, flagTarget, MaxTargetQPS, target)
	case !(headroom > 0 && headroom <= 1):
		return fmt.Errorf("%w: %s must be a share of capacity in (0, 1] (seed 001 plans at %g), got %g", ErrBadPlan, flagHeadroom, capacity.DefaultHeadroom, headroom)
	}
	return nil
}

// MakePlan sizes a fleet of target req/s from rec at headroom. Inputs out
// of range are an error wrapping ErrBadPlan (check them first with
// CheckPlanInputs to name the flags); a recommendation without capacity
// one wrapping ErrNoCapacity.
func MakePlan(rec *store.Recommendation, target, headroom float64) (*Plan, error) {
	if err := CheckPlanInputs(target, headroom, "target", "headroom"); err != nil {
		return nil, err
	}
	if !(rec.Capacity > 0) {
		return nil, fmt.Errorf("%w: run %d of study %s measured another objective; re-run the study with objective: max_capacity to measure the capacity of the winner, the baseline and TF's defaults",
			ErrNoCapacity, rec.Run, rec.Study)
	}
	p := &Plan{Study: rec.Study, Run: rec.Run, Recommendation: rec.Seq, TargetQPS: target, Headroom: headroom, Confidence: rec.Confidence}
	low := rec.CapacityLow
	if !(low > 0) {
		low = rec.Capacity
	}
	p.Rows = append(p.Rows, row(PlanRow{Label: "recommended", Role: "recommended", Config: rec.Config,
		Capacity: rec.Capacity, Low: low, High: max(rec.CapacityHigh, rec.Capacity),
		Repeats: rec.CapacityRepeats, Floors: rec.CapacityFloors}, target, headroom))
	if p.Rows[0].Replicas == 0 {
		p.Note = "no fleet is sized: the recommendation's " + p.Rows[0].Note
	}
	defaults := -1
	baseline := -1
	for _, c := range rec.Capacities {
		r := PlanRow{Label: c.Label, Config: c.Config, Role: "candidate", Capacity: c.Capacity, Low: c.Low, High: c.High, Repeats: c.Repeats, Floors: c.Floors}
		switch {
		case c.Label == labelDefaults:
			r.Role = "tf-defaults"
		case strings.HasPrefix(c.Label, "baseline"):
			r.Role = "baseline"
		}
		if c.Feasible < c.Repeats && c.Capacity > 0 {
			r.Note = fmt.Sprintf("met the SLO at some rate in %d of %d repeats", c.Feasible, c.Repeats)
		}
		p.Rows = append(p.Rows, row(r, target, headroom))
		switch r.Role {
		case "tf-defaults":
			defaults, baseline = len(p.Rows)-1, len(p.Rows)-1
		case "baseline":
			baseline = len(p.Rows) - 1
		}
	}
	if defaults < 0 {
		why := "not measured: the run's baseline was " + strings.TrimSuffix(strings.TrimPrefix(rec.Baseline, "baseline ("), ")")
		if rec.Baseline == "" {
			why = "not measured by this run"
		}
		p.Rows = append(p.Rows, PlanRow{Label: "tf-defaults", Role: "tf-defaults", Note: why})
	}
	win := p.Rows[0].Replicas
	if win > 0 && baseline >= 0 && p.Rows[baseline].Replicas > 0 {
		n := p.Rows[baseline].Replicas - win
		share := float64(n) / float64(p.Rows[baseline].Replicas)
		p.Saved, p.SavedShare = &n, &share
	}
	if win > 0 && defaults >= 0 && p.Rows[defaults].Replicas > 0 {
		n := p.Rows[defaults].Replicas - win
		p.SavedVsDefaults = &n
	}
	if p.Note == "" && (rec.CapacityLow == 0 || rec.CapacityLow == rec.Capacity) {
		p.Note = "one confirmation repeat gives no interval: the plan uses the mean, not a lower bound"
	}
	return p, nil
}

// row fills r's per-server rate and replica count, or its note: a row
// that met the SLO at no rate, or whose interval is too wide to plan on
// (capacity.PlanningCapacity), has no replica count.
func row(r PlanRow, target, headroom float64) PlanRow {
	if !(r.Capacity > 0) {
		if r.Note == "" {
			r.Note = "met the SLO at no rate tried: no number of servers carries the target within it"
		}
		return r
	}
	c, err := capacity.PlanningCapacity(r.Capacity, r.Low, r.High)
	if err == nil {
		r.Replicas, err = capacity.Replicas(target, c, headroom)
	}
	if err != nil {
		r.Replicas = 0
		r.addNote(err.Error())
		return r
	}
	r.PerServer = c * headroom
	if r.Floors > 0 {
		of := ""
		if r.Repeats > 0 {
			of = fmt.Sprintf(" of %d", r.Repeats)
		}
		r.addNote(fmt.Sprintf("a lower bound in %d%s repeats: the load generator could not offer more, so a server may carry more than planned", r.Floors, of))
	}
	return r
}

// addNote appends note to r's, after a "; " when it has one.
func (r *PlanRow) addNote(note string) {
	if r.Note != "" {
		note = r.Note + "; " + note
	}
	r.Note = note
}

// Text renders p for people: one line per configuration and the saving.
func (p *Plan) Text() string {
	var b strings.Builder
	conf := ""
	if p.Confidence > 0 {
		conf = fmt.Sprintf(" at %g%% confidence", 100*p.Confidence)
	}
	fmt.Fprintf(&b, "study %s, run %d: %s req/s with each server loaded to %g%% of its capacity's lower bound%s\n",
		p.Study, p.Run, trimNum(p.TargetQPS), 100*p.Headroom, conf)
	fmt.Fprintf(&b, "%-26s %12s  %-22s %11s %9s\n", "configuration", "capacity", "interval (req/s)", "per server", "replicas")
	for _, r := range p.Rows {
		if r.Replicas == 0 {
			c, iv := "-", ""
			if r.Capacity > 0 || r.Repeats > 0 {
				c = fmt.Sprintf("%.1f", r.Capacity)
			}
			if r.Low > 0 && r.Low < r.High {
				iv = fmt.Sprintf("[%8.1f, %8.1f]", r.Low, r.High)
			}
			fmt.Fprintf(&b, "%-26s %12s  %-22s %11s %9s  (%s)\n", r.Label, c, iv, "", "-", r.Note)
			continue
		}
		line := fmt.Sprintf("%-26s %12.1f  [%8.1f, %8.1f]  %11.1f %9d", r.Label, r.Capacity, r.Low, r.High, r.PerServer, r.Replicas)
		if r.Note != "" {
			line += "  (" + r.Note + ")"
		}
		b.WriteString(line + "\n")
	}
	switch {
	case p.Saved != nil:
		fmt.Fprintf(&b, "tuning saves %d of %d servers (%.0f%%) against the baseline", *p.Saved, *p.Saved+p.Rows[0].Replicas, 100**p.SavedShare)
		if p.SavedVsDefaults != nil && !p.baselineIsDefaults() {
			fmt.Fprintf(&b, ", %d against TF's defaults", *p.SavedVsDefaults)
		}
		b.WriteString("\n")
	case p.Rows[0].Replicas == 0:
		b.WriteString("no saving stated: the recommendation has no server count\n")
	default:
		b.WriteString("no saving stated: the baseline has no server count (see its row)\n")
	}
	if p.Note != "" {
		b.WriteString("note: " + p.Note + "\n")
	}
	return b.String()
}

func (p *Plan) baselineIsDefaults() bool {
	for _, r := range p.Rows {
		if r.Role == "baseline" {
			return false
		}
	}
	return true
}

func trimNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%g", f)
}

// ErrNoRecommendation says a study (or run) has no recommendation to plan
// with.
var ErrNoRecommendation = errors.New("tuner: no recommendation yet")

// PlanRecommendation finds the recommendation a plan is made for: run's
// when run > 0, else the study's incumbent (its latest accepted
// recommendation), else its latest.
func PlanRecommendation(ctx context.Context, db *store.DB, study string, run uint64) (*store.Recommendation, error) {
	recs, err := db.Recommendations(ctx, study)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if run > 0 {
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].Run == run {
				return &recs[i], nil
			}
		}
		return nil, fmt.Errorf("%w: run %d of study %s made no recommendation", ErrNoRecommendation, run, study)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: study %s has no recommendation yet: tune it first (objective: max_capacity)", ErrNoRecommendation, study)
	}
	inc, err := db.Incumbent(ctx, study)
	if err == nil {
		return inc, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return &recs[len(recs)-1], nil
}
