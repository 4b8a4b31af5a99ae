package tuner

import (
	"context"
	"fmt"
	"math"

	"github.com/batchtune/batchtune/internal/estimate"
	"github.com/batchtune/batchtune/store"
)

// A warm start flags the incumbent degraded when its objective fell past
// schedule.degradation_threshold since it was accepted. One measurement
// is not enough to say so (issue 15 item 14: one noisy re-measure flagged
// it DEGRADED -11%): when the first re-measure passes the threshold, the
// incumbent is measured again, up to confirmation.repeats times in all,
// and the loss is judged with an interval, as gains are: degraded only
// when even the interval's most favourable end is a loss past the
// threshold.

// incumbentNow gathers the run's fresh measurements of the incumbent
// (role incumbent): the objective of each that measured something, and
// whether every one met the SLO.
func incumbentNow(trials []store.Trial) (fresh []float64, feasible bool) {
	feasible = true
	for _, tr := range trials {
		if tr.Role != store.RoleIncumbent || !tr.State.Terminal() || tr.State == store.TrialInterrupted || infraFailure(&tr) {
			continue
		}
		if tr.Objective != nil && tr.State != store.TrialInvalid {
			fresh = append(fresh, *tr.Objective)
		}
		feasible = feasible && tr.State == store.TrialSucceeded && tr.Feasible
	}
	return fresh, feasible
}

// remeasureIncumbent measures the incumbent until the run holds
// confirmation.repeats fresh measurements of it (or one breaks the SLO).
func (t *Tuner) remeasureIncumbent(ctx context.Context, run *store.Run, trials []store.Trial, inc *store.Recommendation, loss float64) ([]store.Trial, error) {
	want := t.study.Confirmation.Repeats
	for {
		fresh, feasible := incumbentNow(trials)
		if len(fresh) >= want || !feasible {
			return trials, nil
		}
		if t.stopping(ctx) {
			return trials, ErrInterrupted
		}
		tr := store.Trial{Study: t.study.Name, Run: run.ID, Role: store.RoleIncumbent, Config: inc.Config, State: store.TrialSuggested,
			Why: fmt.Sprintf("warm start: the incumbent measured %.0f%% below its accepted figure; measuring it again (%d of %d) before calling it degraded",
				100*loss, len(fresh)+1, want)}
		st := stage{name: StageWarm, index: len(fresh) + 1, total: want}
		if err := t.put(ctx, &tr, st, true); err != nil {
			return trials, err
		}
		err := t.measureRepeat(ctx, &tr, t.launch(configOf(inc.Config)), st, &trials)
		trials = append(trials, tr)
		if err != nil {
			return trials, err
		}
	}
}

// acceptedSamples are the confirmation repeats that made inc the
// recommendation: its configuration, measured in its run.
func (t *Tuner) acceptedSamples(ctx context.Context, inc *store.Recommendation) ([]float64, error) {
	trials, err := t.db.Trials(ctx, t.study.Name, inc.Run)
	if err != nil {
		return nil, err
	}
	key := configOf(inc.Config).Key()
	var out []float64
	for _, tr := range trials {
		if (tr.Role == store.RoleConfirm || tr.Role == store.RoleIncumbent) && counted(&tr) && tr.State == store.TrialSucceeded &&
			tr.Objective != nil && configOf(tr.Config).Key() == key {
			out = append(out, *tr.Objective)
		}
	}
	return out, nil
}

// degradedWithConfidence judges the loss from then (the accepted figures;
// just the recommendation's objective when its repeats are gone) to now
// (fresh measurements): the loss's point estimate and interval (positive
// is worse), and whether the whole interval lies past threshold.
func (t *Tuner) degradedWithConfidence(then, now []float64, threshold float64) (loss, low, high float64, degraded bool) {
	g := gain(now, then, t.maximize(), t.study.Confirmation.Confidence)
	loss, low, high = -g.Rel, -g.High, -g.Low
	if g.Bounded {
		return loss, low, high, low > threshold
	}
	// No interval on one side: ask the other side's interval alone.
	if len(now) >= 2 && len(then) == 1 {
		e := estimate.Of(now, t.study.Confirmation.Confidence)
		worst, best := e.Low, e.High // the range now's mean may take
		if !t.maximize() {
			worst, best = e.High, e.Low
		}
		rel := func(v float64) float64 {
			if t.maximize() {
				return (then[0] - v) / then[0]
			}
			return (v - then[0]) / then[0]
		}
		low, high = rel(best), rel(worst)
		return loss, low, high, low > threshold
	}
	return loss, loss, loss, false // one measurement each: no verdict
}

// incumbentLoss is the mean of the fresh measurements and the relative
// loss since acceptance (positive is worse); a loss of 1 when nothing was
// measured (it does not run any more).
func (t *Tuner) incumbentLoss(fresh []float64, inc *store.Recommendation) (now, loss float64) {
	if len(fresh) == 0 {
		return 0, 1
	}
	for _, v := range fresh {
		now += v
	}
	now /= float64(len(fresh))
	if inc.Objective != 0 {
		loss = (inc.Objective - now) / math.Abs(inc.Objective)
		if !t.maximize() {
			loss = -loss
		}
	}
	return now, loss
}
