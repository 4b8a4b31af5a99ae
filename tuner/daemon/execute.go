package daemon

import (
	"context"
	"errors"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// execute runs job j and records how it ended. It runs on a goroutine of
// its own; the job's target stays reserved until it returns, rollout
// included.
func (d *Daemon) execute(ctx context.Context, j *job) {
	log := d.log.With("study", j.study, "job", j.id, "reason", j.reason)
	log.Info("run starting", "target", j.target.String(), "warm_start", j.opts.WarmStart, "budget", j.opts.Budget)
	rep, err := d.runner.Run(ctx, j.spec, withVerify(j.opts, j.spec, log), func(e tuner.Event) { d.observe(j, e) })

	d.mu.Lock()
	cancelled := j.cancelled
	runID := j.progress.Run
	d.mu.Unlock()
	if rep != nil && rep.Run.ID != 0 {
		runID = rep.Run.ID
	}

	var outcome string
	switch {
	case cancelled:
		outcome = OutcomeCancelled
		if runID != 0 {
			if aerr := d.abandon(ctx, j.study, runID, "cancelled through the API"); aerr != nil {
				log.Error("marking the cancelled run", "run", runID, "err", aerr)
			}
		}
		log.Info("run cancelled", "run", runID)
	case errors.Is(err, tuner.ErrInterrupted):
		outcome = OutcomeInterrupted
		log.Info("run interrupted; it resumes when the daemon starts again", "run", runID)
	case err != nil:
		outcome = string(store.OutcomeError)
		log.Error("run failed", "run", runID, "err", err)
	case rep != nil && rep.Run.Outcome != store.OutcomeNone:
		outcome = string(rep.Run.Outcome)
	default:
		outcome = string(store.OutcomeError)
	}
	d.m.runs.WithLabelValues(j.study, outcome).Inc()

	var rollout *RolloutResult
	if err == nil && rep != nil {
		d.reportMetrics(ctx, j, rep)
		if accepted(rep) {
			rollout = d.rollout(ctx, j, rep, log)
		} else if v := rep.Verification; v != nil && v.Verdict != store.VerifyPassed {
			log.Warn("acceptance soak did not pass: the incumbent is kept, nothing rolled out", "run", rep.Run.ID, "verdict", v.Verdict, "detail", rep.Run.Detail)
		}
		if dec := rep.Decision; dec != nil && dec.Degraded {
			log.Warn("INCUMBENT DEGRADED", "run", rep.Run.ID, "degradation", dec.Degradation,
				"threshold", j.spec.Schedule.DegradationThreshold, "decision", dec.Message)
		}
		log.Info("run ended", "run", rep.Run.ID, "outcome", outcome, "resumed", rep.Resumed, "trials", len(rep.Trials), "detail", rep.Run.Detail)
	}

	d.mu.Lock()
	delete(d.running, j.study)
	if st := d.studies[j.study]; st != nil {
		st.lastOutcome = outcome
		st.lastError = ""
		if err != nil && !cancelled && !errors.Is(err, tuner.ErrInterrupted) {
			st.lastError = err.Error()
		}
		if rep != nil && rep.Decision != nil {
			st.lastDecision = rep.Decision
			st.degraded, st.degradation = rep.Decision.Degraded, rep.Decision.Degradation
		}
		if rollout != nil {
			st.lastRollout = rollout
		}
		if st.removed {
			delete(d.studies, j.study)
			d.m.dropStudy(j.study)
		} else {
			d.m.running.WithLabelValues(j.study).Set(0)
		}
	}
	d.mu.Unlock()
	d.wake()
}

// accepted reports whether a run changed the recommendation in production:
// a warm start's decision, or a cold run's accepted recommendation.
func accepted(rep *tuner.Report) bool {
	if rep.Decision != nil {
		return rep.Decision.Accepted && rep.Recommendation != nil
	}
	return rep.Recommendation != nil && rep.Recommendation.Accepted
}

// reportMetrics sets the gauges a finished run changes.
func (d *Daemon) reportMetrics(ctx context.Context, j *job, rep *tuner.Report) {
	name := j.study
	obj := tuner.Objective(j.spec)
	var best *float64
	for _, tr := range rep.Trials {
		if tr.State == store.TrialSucceeded && tr.Feasible && tr.Objective != nil && (best == nil || obj.Better(*tr.Objective, *best)) {
			v := *tr.Objective
			best = &v
		}
	}
	if best != nil {
		d.m.bestObjective.WithLabelValues(name).Set(*best)
	}
	if rep.Run.State == store.RunFinished && (rep.Run.Outcome == store.OutcomeRecommended || rep.Run.Outcome == store.OutcomeKept) {
		end := rep.Run.Ended
		if end.IsZero() {
			end = d.clock.Now()
		}
		d.m.lastSuccess.WithLabelValues(name).Set(float64(end.UnixNano()) / 1e9)
	}
	if dec := rep.Decision; dec != nil && dec.Incumbent != nil {
		d.m.degradation.WithLabelValues(name).Set(dec.Degradation)
		d.m.degraded.WithLabelValues(name).Set(b2f(dec.Degraded))
	} else if rep.Decision != nil {
		d.m.degraded.WithLabelValues(name).Set(0)
	}
	if inc, err := d.db.Incumbent(ctx, name); err == nil {
		d.m.incumbentObj.WithLabelValues(name).Set(inc.Objective)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// abandon closes an unfinished run as cancelled, so that it is not
// resumed.
func (d *Daemon) abandon(ctx context.Context, study string, id uint64, why string) error {
	r, err := d.db.Run(context.WithoutCancel(ctx), study, id)
	if err != nil {
		return err
	}
	if !r.State.Unfinished() {
		return nil
	}
	r.State, r.Outcome, r.Detail = store.RunCancelled, store.OutcomeCancelled, why
	r.Ended = d.clock.Now().UTC()
	return d.db.PutRun(context.WithoutCancel(ctx), r)
}

// observe follows a running job's progress from the tuner's events.
func (d *Daemon) observe(j *job, e tuner.Event) {
	d.mu.Lock()
	p := &j.progress
	if e.Run != 0 {
		p.Run = e.Run
	}
	if e.Stage != "" {
		p.Stage, p.Index, p.Total = e.Stage, e.Index, e.Total
	}
	if e.Message != "" {
		p.Message = e.Message
	}
	if e.Trial != nil {
		p.Trial, p.TrialState = e.Trial.Seq, e.Trial.State
		tr := e.Trial
		if tr.State == store.TrialSucceeded && tr.Feasible && tr.Objective != nil &&
			(j.best == nil || tuner.Objective(j.spec).Better(*tr.Objective, *j.best)) {
			v := *tr.Objective
			j.best = &v
			p.Best = &v
		}
	}
	d.mu.Unlock()
	if e.Trial != nil && e.Trial.State.Terminal() {
		d.m.trial(j.study, e.Trial)
	}
}
