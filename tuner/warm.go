package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batchtune/batchtune/store"
)

// StageWarm is the stage of a warm start that re-measures the incumbent and
// the previous top candidates.
const StageWarm = "warm"

// incumbentOf returns the study's accepted recommendation, nil when none.
func (t *Tuner) incumbentOf(ctx context.Context) (*store.Recommendation, error) {
	inc, err := t.db.Incumbent(ctx, t.study.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return inc, err
}

// prior returns the search trials of the study's earlier runs: what a warm
// start knows before it measures anything.
func (t *Tuner) prior(ctx context.Context, run *store.Run) ([]store.Trial, error) {
	all, err := t.db.StudyTrials(ctx, t.study.Name)
	if err != nil {
		return nil, err
	}
	var out []store.Trial
	for _, tr := range all {
		if tr.Run < run.ID && tr.Role == store.RoleSearch {
			out = append(out, tr)
		}
	}
	return out, nil
}

// previousTop lists the configurations the incumbent's run confirmed beside
// it, in the order its confirmation first measured them (the strategy's
// ranking, search.Rank), at most top_k.
func (t *Tuner) previousTop(ctx context.Context, inc *store.Recommendation) ([]store.Trial, error) {
	trials, err := t.db.Trials(ctx, t.study.Name, inc.Run)
	if err != nil {
		return nil, err
	}
	incKey := configOf(inc.Config).Key()
	seen := map[string]bool{incKey: true}
	var out []store.Trial
	for _, tr := range trials {
		k := configOf(tr.Config).Key()
		if tr.Role != store.RoleConfirm || seen[k] || len(t.space.Check(configOf(tr.Config))) > 0 {
			continue
		}
		seen[k] = true
		out = append(out, tr)
	}
	if len(out) > t.study.Confirmation.TopK {
		out = out[:t.study.Confirmation.TopK]
	}
	return out, nil
}

// warmStage measures the incumbent (role incumbent) and the previous top
// candidates (role search, so that the strategy sees them fresh) once each,
// unless this run already did (a resumed run).
func (t *Tuner) warmStage(ctx context.Context, run *store.Run, trials []store.Trial, inc *store.Recommendation) ([]store.Trial, error) {
	top, err := t.previousTop(ctx, inc)
	if err != nil {
		return trials, err
	}
	type item struct {
		role, label string
		config      []store.Param
	}
	items := []item{{store.RoleIncumbent, "the incumbent", inc.Config}}
	for _, tr := range top {
		items = append(items, item{store.RoleSearch, fmt.Sprintf("previous candidate (run %d trial %d)", tr.Run, tr.Seq), tr.Config})
	}
	t.observe(Event{Time: t.now(), Run: run.ID, Stage: StageWarm, Total: len(items),
		Message: fmt.Sprintf("warm start: re-measuring the incumbent and %d previous candidate(s)", len(top))})
	for i, it := range items {
		key := configOf(it.config).Key()
		if slices.ContainsFunc(trials, func(tr store.Trial) bool {
			return tr.Role == it.role && configOf(tr.Config).Key() == key && tr.State.Terminal() && tr.State != store.TrialInterrupted
		}) {
			continue
		}
		if t.stopping(ctx) {
			return trials, ErrInterrupted
		}
		tr := store.Trial{Study: t.study.Name, Run: run.ID, Role: it.role, Config: it.config, State: store.TrialSuggested, Why: "warm start: " + it.label}
		st := stage{name: StageWarm, index: i + 1, total: len(items)}
		if err := t.put(ctx, &tr, st, true); err != nil {
			return trials, err
		}
		err := t.runTrial(ctx, &tr, t.launch(configOf(it.config)), st)
		trials = append(trials, tr)
		if err != nil {
			return trials, err
		}
	}
	return trials, nil
}

// challenge decides a warm start: does anything this run found beat the
// incumbent by the accept margin, with confidence? It checks the
// incumbent's health first (degradation since it was accepted), screens the
// best challenger against the incumbent's fresh figure, and only then pays
// for a side-by-side confirmation.
func (t *Tuner) challenge(ctx context.Context, run *store.Run, trials []store.Trial, inc *store.Recommendation) (*Confirmation, *Decision, []store.Trial, error) {
	sch := t.study.Schedule
	dec := &Decision{Incumbent: inc}
	incKey := configOf(inc.Config).Key()

	// The incumbent now, from its fresh measurement(s); a loss past the
	// threshold is measured again and judged with an interval (degrade.go).
	fresh, incFeasible := incumbentNow(trials)
	now, loss := t.incumbentLoss(fresh, inc)
	verdict := ""
	if incFeasible && len(fresh) > 0 && loss > sch.DegradationThreshold {
		var err error
		if trials, err = t.remeasureIncumbent(ctx, run, trials, inc, loss); err != nil {
			return nil, dec, trials, err
		}
		fresh, incFeasible = incumbentNow(trials)
		now, loss = t.incumbentLoss(fresh, inc)
		then, err := t.acceptedSamples(ctx, inc)
		if err != nil {
			return nil, dec, trials, err
		}
		if len(then) == 0 {
			then = []float64{inc.Objective}
		}
		_, low, high, degraded := t.degradedWithConfidence(then, fresh, sch.DegradationThreshold)
		dec.Degraded = degraded
		verdict = fmt.Sprintf("; loss interval %+.1f%% to %+.1f%% over %d re-measures", 100*low, 100*high, len(fresh))
		if !degraded {
			verdict += ", not past the " + pct(sch.DegradationThreshold) + " threshold with confidence"
		}
	}
	dec.Degradation = loss
	dec.Degraded = dec.Degraded || !incFeasible || len(fresh) == 0
	health := fmt.Sprintf("incumbent %s now (was %s, %+.1f%%%s)", t.fmtObjective(now), t.fmtObjective(inc.Objective), -100*dec.Degradation, verdict)
	if !incFeasible {
		health += ", breaking the SLO"
	}

	// The best challenger this run measured.
	var best *store.Trial
	for i := range trials {
		tr := &trials[i]
		if tr.Role != store.RoleSearch || tr.State != store.TrialSucceeded || !tr.Feasible || tr.Objective == nil || configOf(tr.Config).Key() == incKey {
			continue
		}
		if best == nil || t.better(*tr.Objective, *best.Objective) {
			best = tr
		}
	}
	screen := func(v float64) bool {
		if !incFeasible || len(fresh) == 0 {
			return true
		}
		if t.maximize() {
			return v > now*(1+sch.AcceptMargin)
		}
		return v < now*(1-sch.AcceptMargin)
	}
	if best == nil || !screen(*best.Objective) {
		dec.Kept = true
		dec.Message = "incumbent kept: no configuration beat it by the " + pct(sch.AcceptMargin) + " margin; " + health
		if best != nil {
			dec.Message += fmt.Sprintf("; best challenger trial %d at %s", best.Seq, t.fmtObjective(*best.Objective))
		}
		return nil, dec, trials, nil
	}

	cand := Candidate{Label: fmt.Sprintf("trial %d", best.Seq), Config: best.Config, SearchObjective: best.Objective,
		role: store.RoleConfirm, launch: t.launch(configOf(best.Config))}
	base := Candidate{Label: "incumbent", Config: inc.Config, role: store.RoleIncumbent, launch: t.launch(configOf(inc.Config))}
	conf, trials, err := t.confirm(ctx, run, trials, []Candidate{cand}, base)
	if err != nil {
		return nil, dec, trials, err
	}
	w := conf.WinnerCandidate()
	switch {
	case w == nil:
		dec.Kept = true
		dec.Message = "incumbent kept: the challenger did not meet the SLO in every confirmation repeat; " + health
	case !conf.Baseline.Eligible():
		dec.Accepted = true
		why := "breaks the SLO now"
		if len(conf.Baseline.Samples) == 0 {
			why = "no longer runs (" + firstReason(conf.Baseline.Reasons) + ")"
		}
		dec.Message = fmt.Sprintf("changed: the incumbent %s and %s meets the SLO at %s", why, w.Label, t.fmtObjective(w.Estimate.Mean))
	case conf.Gain != nil && conf.Gain.Bounded && conf.Gain.Low > sch.AcceptMargin:
		dec.Accepted = true
		dec.Message = fmt.Sprintf("changed: %s beats the incumbent by %+.1f%% (%.0f%% interval %+.1f%% to %+.1f%%), above the %s margin",
			w.Label, 100*conf.Gain.Rel, 100*conf.Gain.Conf, 100*conf.Gain.Low, 100*conf.Gain.High, pct(sch.AcceptMargin))
	default:
		dec.Kept = true
		dec.Message = "incumbent kept: " + w.Label + " is not better by the " + pct(sch.AcceptMargin) + " margin with confidence"
		if g := conf.Gain; g != nil {
			dec.Message += fmt.Sprintf(" (%+.1f%%, interval %+.1f%% to %+.1f%%)", 100*g.Rel, 100*g.Low, 100*g.High)
		}
	}
	if !dec.Accepted {
		dec.Message += "; " + health
	}
	return conf, dec, trials, nil
}

func pct(f float64) string { return fmt.Sprintf("%g%%", 100*f) }

// fmtObjective renders an objective value in its unit.
func (t *Tuner) fmtObjective(v float64) string {
	return t.objective.Kind.Format(v, qname(t.study.SLO.Quantile))
}
