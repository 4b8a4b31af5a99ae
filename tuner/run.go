package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// RunOptions vary one run of a study.
type RunOptions struct {
	// Kind is recorded with the run; KindOneShot when empty.
	Kind store.RunKind
	// Budget is the search stage's trial budget. When 0: the study's
	// schedule.trials for a warm start that has an incumbent, its
	// search.trials otherwise (a first run needs the full budget).
	Budget int
	// Drain, when closed, stops the run before its next trial: the trial
	// in progress finishes, the server is restored, and the run is left
	// resumable (Run returns ErrInterrupted). Cancelling Run's context
	// instead aborts the trial in progress.
	Drain <-chan struct{}
	// WarmStart makes the run a re-tune of a study that already has an
	// accepted recommendation (the incumbent): the search's history starts
	// with the trials of earlier runs (prior knowledge), the incumbent and
	// the previous top candidates are re-measured first, and a new
	// configuration replaces the incumbent only when its gain over it,
	// measured side by side, has a confidence interval whose lower bound
	// clears the study's schedule.accept_margin. Otherwise the incumbent is
	// kept (store.OutcomeKept) and nothing is exported. Without an
	// incumbent a warm start is an ordinary run.
	WarmStart bool
	// Verify, when set, is the acceptance soak a new recommendation must
	// pass before it is exported (verifyhook.go); when it does not, the
	// incumbent is kept.
	Verify Verifier
}

// Decision is a warm-started run's verdict on the incumbent.
type Decision struct {
	// Incumbent is the recommendation in production when the run started;
	// nil when there was none.
	Incumbent *store.Recommendation `json:"incumbent,omitempty"`
	// Accepted: a new configuration replaced the incumbent and was exported.
	// Kept: the incumbent stays; nothing was exported.
	Accepted bool `json:"accepted"`
	Kept     bool `json:"kept"`
	// Degradation is the incumbent's relative loss of objective since it
	// was accepted (positive is worse); Degraded is set when it exceeds the
	// study's schedule.degradation_threshold.
	Degradation float64 `json:"degradation"`
	Degraded    bool    `json:"degraded"`
	// Message says what was decided and why, in one line.
	Message string `json:"message"`
}

// Record copies what the decision found about the incumbent into the
// run's record, so that a degraded incumbent is still known after the
// process that measured it is gone.
func (d *Decision) Record(run *store.Run) {
	if d == nil || d.Incumbent == nil {
		return
	}
	v := d.Degradation
	run.Degradation, run.Degraded = &v, d.Degraded
}

// Report is what a run found, for people and for the daemon.
type Report struct {
	Study   string        `json:"study"`
	Run     store.Run     `json:"run"`
	Resumed bool          `json:"resumed"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// StopReason says why the search stage ended.
	StopReason string `json:"stop_reason"`
	// Trials is every trial of the run, in order.
	Trials []store.Trial `json:"trials"`
	// Confirmation is the confirmation stage's verdict; nil when the run
	// ended before it (no feasible trial, interrupted).
	Confirmation *Confirmation `json:"confirmation,omitempty"`
	// Recommendation is what was recommended and stored; nil when nothing was.
	Recommendation *store.Recommendation `json:"recommendation,omitempty"`
	// Exported lists the files written.
	Exported []string `json:"exported,omitempty"`
	// Decision is set for warm-started runs.
	Decision *Decision `json:"decision,omitempty"`
	// Verification is the acceptance soak of the recommendation, when
	// RunOptions.Verify asked for one.
	Verification *store.Verification `json:"verification,omitempty"`
}

// Run runs the study: it resumes the study's unfinished run when there is
// one (same spec), or starts a new one; searches; confirms; recommends and
// exports. The server is put back as it was before Run returns, even when
// ctx is cancelled (ErrInterrupted: the run stays resumable).
func (t *Tuner) Run(ctx context.Context, ro RunOptions) (rep *Report, err error) {
	started := t.now()
	if ro.Kind == "" {
		ro.Kind = store.KindOneShot
	}
	s := t.study
	if err := t.db.PutStudy(ctx, &store.Study{Name: s.Name, SpecHash: s.Hash(), Spec: storedSpec(s.Source)}); err != nil {
		return nil, err
	}
	if err := t.rt.Recover(ctx); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		if rerr := t.rt.Restore(rctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("runtime restore: %w", rerr))
		}
	}()
	if err := t.productionBaseline(ctx); err != nil {
		return nil, err
	}

	t.drain, t.verify, t.pin = ro.Drain, ro.Verify, ""
	var inc *store.Recommendation
	if ro.WarmStart {
		if inc, err = t.incumbentOf(ctx); err != nil {
			return nil, err
		}
	}
	budget := ro.Budget
	switch {
	case budget > 0:
	case inc != nil:
		budget = s.Schedule.Trials
	default:
		budget = s.Search.Trials
	}
	run, trials, resumed, err := t.openRun(ctx, ro.Kind, budget)
	if err != nil {
		return nil, err
	}
	t.host.start = t.host.read()
	rep = &Report{Study: s.Name, Resumed: resumed}
	t.log.Info("run started", "run", run.ID, "resumed", resumed, "budget", budget, "strategy", t.strategy.Name())
	t.observe(Event{Time: t.now(), Run: run.ID, Message: fmt.Sprintf("run %d %s", run.ID, map[bool]string{true: "resumed", false: "started"}[resumed])})

	// rec is the run's recommendation, stored with the run's end in one
	// transaction: it becomes the incumbent only when the run finished
	// and exported it.
	var rec *store.Recommendation
	finish := func(state store.RunState, outcome store.Outcome, detail string) error {
		run.State, run.Outcome, run.Detail = state, outcome, detail
		if state != store.RunRunning {
			run.Ended = t.now().UTC()
		}
		keep := rec
		switch {
		case state == store.RunInterrupted:
			keep = nil // the resumed run recommends again
		case rec != nil && rec.Accepted && (state != store.RunFinished || outcome != store.OutcomeRecommended):
			rec.Accepted = false
			rec.Note = strings.TrimPrefix(rec.Note+"; not accepted: the run "+string(outcome), "; ")
			if rep.Decision != nil {
				rep.Decision.Accepted = false
			}
		}
		if err := t.db.FinishRun(context.WithoutCancel(ctx), run, keep); err != nil {
			return err
		}
		rep.Run = *run
		rep.Elapsed = t.now().Sub(started)
		if all, err := t.db.Trials(context.WithoutCancel(ctx), s.Name, run.ID); err == nil {
			rep.Trials = all
		}
		return nil
	}

	var prior []store.Trial
	if inc != nil {
		if prior, err = t.prior(ctx, run); err != nil {
			return t.endWithError(ctx, rep, err, finish)
		}
		if trials, err = t.warmStage(ctx, run, trials, inc); err != nil {
			return t.endWithError(ctx, rep, err, finish)
		}
	}
	trials, rep.StopReason, err = t.searchStage(ctx, run, trials, budget, prior)
	if err != nil {
		return t.endWithError(ctx, rep, err, finish)
	}
	// Parallel trials on several nodes: what follows compares on one.
	if t.pin = pinNode(trials); t.pin != "" {
		t.log.Info("confirming on one node", "node", t.pin, "search nodes", searchNodes(trials))
	}
	if inc != nil {
		return t.finishWarm(ctx, run, trials, inc, rep, &rec, finish)
	}
	conf, trials, err := t.confirmStage(ctx, run, trials)
	if err != nil {
		return t.endWithError(ctx, rep, err, finish)
	}
	rep.Confirmation = conf
	if conf.Winner == nil {
		detail := noRecommendationDetail(conf) + unstableNote(t.judgeRun(run, conf))
		t.log.Warn("run ended without a recommendation", "run", run.ID, "detail", detail)
		return rep, finish(store.RunFinished, store.OutcomeNoFeasible, detail)
	}
	if rec, err = t.recommend(ctx, run, conf, true); err != nil {
		return t.endWithError(ctx, rep, err, finish)
	}
	rep.Recommendation = rec
	if ro.WarmStart {
		rep.Decision = &Decision{Accepted: true, Message: "first recommendation: " + conf.Why}
	}
	if ok, why, err := t.verifyBeforeExport(ctx, rec, rep); err != nil {
		return t.endWithError(ctx, rep, err, finish)
	} else if !ok {
		return rep, finish(store.RunFinished, store.OutcomeKept, why)
	}
	if rep.Exported, err = t.export(rec); err != nil {
		return t.endWithError(ctx, rep, exportFailed(err, s.Name, run.ID), finish)
	}
	run.Exported = rep.Exported
	t.log.Info("run finished", "run", run.ID, "trials", len(trials), "gain", rec.Gain)
	detail := conf.Why
	if st := t.judgeRun(run, conf); weakGain(conf) {
		detail += unstableNote(st)
	}
	return rep, finish(store.RunFinished, store.OutcomeRecommended, detail)
}

// finishWarm ends a warm-started run: the challenge against the incumbent,
// then either the new recommendation exported, or the incumbent kept (a
// confirmed challenger that fell short is still kept in the history, not
// accepted).
func (t *Tuner) finishWarm(ctx context.Context, run *store.Run, trials []store.Trial, inc *store.Recommendation, rep *Report, pending **store.Recommendation, finish func(store.RunState, store.Outcome, string) error) (*Report, error) {
	conf, dec, _, err := t.challenge(ctx, run, trials, inc)
	rep.Confirmation, rep.Decision = conf, dec
	if err != nil {
		return t.endWithError(ctx, rep, err, finish)
	}
	dec.Record(run)
	if dec.Degraded {
		t.log.Warn("incumbent degraded", "run", run.ID, "degradation", dec.Degradation, "threshold", t.study.Schedule.DegradationThreshold, "detail", dec.Message)
	}
	if conf.WinnerCandidate() != nil {
		rec, err := t.recommend(ctx, run, conf, dec.Accepted)
		if err != nil {
			return t.endWithError(ctx, rep, err, finish)
		}
		rec.Note = dec.Message
		*pending = rec
		rep.Recommendation = rec
	}
	st := t.judgeRun(run, conf)
	if !dec.Accepted {
		t.log.Info("run finished", "run", run.ID, "decision", dec.Message)
		return rep, finish(store.RunFinished, store.OutcomeKept, dec.Message+unstableNote(st))
	}
	if ok, why, err := t.verifyBeforeExport(ctx, rep.Recommendation, rep); err != nil {
		return t.endWithError(ctx, rep, err, finish)
	} else if !ok {
		return rep, finish(store.RunFinished, store.OutcomeKept, why)
	}
	if rep.Exported, err = t.export(rep.Recommendation); err != nil {
		return t.endWithError(ctx, rep, exportFailed(err, t.study.Name, run.ID), finish)
	}
	run.Exported = rep.Exported
	t.log.Info("run finished", "run", run.ID, "decision", dec.Message)
	return rep, finish(store.RunFinished, store.OutcomeRecommended, dec.Message)
}

// endWithError closes the run after err: an interruption leaves it
// resumable, anything else marks it failed with the diagnosis.
func (t *Tuner) endWithError(ctx context.Context, rep *Report, err error, finish func(store.RunState, store.Outcome, string) error) (*Report, error) {
	if errors.Is(err, ErrInterrupted) || ctx.Err() != nil {
		if ferr := finish(store.RunInterrupted, store.OutcomeNone, "interrupted; run the study again to resume"); ferr != nil {
			return rep, errors.Join(ErrInterrupted, ferr)
		}
		return rep, ErrInterrupted
	}
	if ferr := finish(store.RunFailed, store.OutcomeError, err.Error()); ferr != nil {
		return rep, errors.Join(err, ferr)
	}
	return rep, err
}

// openRun resumes the study's unfinished run when it ran the same spec, or
// creates a new run. An unfinished run of another spec is closed as failed:
// its trials answer a different question.
func (t *Tuner) openRun(ctx context.Context, kind store.RunKind, budget int) (*store.Run, []store.Trial, bool, error) {
	s := t.study
	prev, err := t.db.LatestUnfinishedRun(ctx, s.Name)
	switch {
	case err == nil && prev.SpecHash == s.Hash():
		run, trials, err := t.db.ResumeRun(ctx, s.Name, "batchtune stopped during the trial", t.now().UTC())
		if err != nil {
			return nil, nil, false, err
		}
		return run, trials, true, nil
	case err == nil:
		prev.State, prev.Outcome, prev.Ended = store.RunFailed, store.OutcomeError, t.now().UTC()
		prev.Detail = "abandoned: the study spec changed since this run started"
		if err := t.db.PutRun(ctx, prev); err != nil {
			return nil, nil, false, err
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, false, err
	}
	run := &store.Run{Study: s.Name, Kind: kind, State: store.RunRunning, SpecHash: s.Hash(), Started: t.now().UTC(), Budget: budget}
	if err := t.db.CreateRun(ctx, run); err != nil {
		return nil, nil, false, err
	}
	return run, nil, false, nil
}

// searchStage suggests and runs trials until the budget, the stopping rule
// or the space ends it. trials are the run's trials so far (a resumed run).
//
// prior are trials of earlier runs (a warm start): the strategy learns from
// them, the budget and the stopping rule count only this run's.
func (t *Tuner) searchStage(ctx context.Context, run *store.Run, trials []store.Trial, budget int, prior []store.Trial) ([]store.Trial, string, error) {
	s := t.study
	searchTrials := func() []store.Trial {
		var out []store.Trial
		for _, tr := range trials {
			if tr.Role == store.RoleSearch {
				out = append(out, tr)
			}
		}
		return out
	}
	// A resumed run redoes its interrupted search trials first.
	redo := interruptedToRedo(searchTrials())
	failures, rejections := 0, 0
	for {
		hist := searchTrials()
		n := 0
		for _, tr := range hist {
			if ran(tr.State) {
				n++
			}
		}
		if budget > 0 && n >= budget {
			return trials, fmt.Sprintf("trial budget reached (%d trials)", n), nil
		}
		if stop, why := t.stopRule.Stop(history(hist)); stop {
			return trials, why, nil
		}
		if t.stopping(ctx) {
			return trials, "", ErrInterrupted
		}

		// A round: up to search.parallelism trials (one at a time when it
		// is 1), interrupted ones first, then the strategy's suggestions.
		want := t.par
		if budget > 0 {
			want = min(want, budget-n)
		}
		var round []store.Trial
		for len(redo) > 0 && len(round) < want {
			round = append(round, store.Trial{Study: s.Name, Run: run.ID, Role: store.RoleSearch, Config: redo[0].Config,
				Expected: redo[0].Expected, Why: "redo interrupted trial " + fmt.Sprint(redo[0].Seq), State: store.TrialSuggested})
			redo = redo[1:]
		}
		// The round's trials are ranked as if measured on one node.
		ranked := onFirstNode(hist)
		if len(round) < want {
			sugg, err := t.strategy.Suggest(ctx, search.Request{
				Space: t.space, Objective: t.objective, History: history(append(slices.Clip(prior), ranked...)), N: want - len(round), Seed: uint64(s.Search.Seed),
			})
			if err != nil {
				if ctx.Err() != nil {
					return trials, "", ErrInterrupted
				}
				return trials, "", fmt.Errorf("suggest: %w", err)
			}
			if len(sugg) == 0 && len(round) == 0 {
				return trials, "space exhausted: every runnable configuration has been tried", nil
			}
			for _, sg := range sugg {
				round = append(round, store.Trial{Study: s.Name, Run: run.ID, Role: store.RoleSearch, Config: params(sg.Config),
					Expected: sg.Expected, Why: sg.Reason, State: store.TrialSuggested})
			}
		}
		// Every trial of the round is stored in order (a rejected one as
		// such), then the runnable ones run together; trials keeps the
		// store's order.
		var (
			runs     []*store.Trial
			launches []runtime.Config
			sts      []stage
		)
		best := t.bestFeasible(ranked)
		stored := 0
		var err error
		for i := range round {
			tr := &round[i]
			st := stage{name: StageSearch, index: n + len(runs) + 1, total: budget, best: best}
			cfg := configOf(tr.Config)
			vs := t.space.Check(cfg)
			if len(vs) > 0 {
				tr.State = store.TrialRejected
				tr.Reason = vs.Err().Error()
			}
			if err = t.put(ctx, tr, st, true); err != nil {
				break
			}
			stored++
			if len(vs) > 0 {
				if rejections++; rejections >= maxRejections {
					err = fmt.Errorf("%w (%d in a row; last: %s)", ErrTooManyRejections, rejections, tr.Reason)
					break
				}
				continue
			}
			rejections = 0
			runs, launches, sts = append(runs, tr), append(launches, t.launch(cfg)), append(sts, st)
		}
		if err == nil && len(runs) > 0 {
			err = t.runRound(ctx, runs, launches, sts)
		}
		trials = append(trials, round[:stored]...)
		if err != nil {
			return trials, "", err
		}
		for _, tr := range runs {
			if tr.State == store.TrialFailed {
				failures++
				if max := s.Search.MaxFailures; max > 0 && failures >= max {
					return trials, "", fmt.Errorf("%w: %d in a row; last: %s", ErrTooManyFailures, failures, tr.Reason)
				}
			} else {
				failures = 0
			}
		}
		if t.par > 1 {
			if trials, err = t.measureReferences(ctx, run, trials); err != nil {
				return trials, "", err
			}
		}
	}
}

// interruptedToRedo lists the interrupted trials whose configuration has not
// finished since, in order.
func interruptedToRedo(trials []store.Trial) []store.Trial {
	var out []store.Trial
	listed := map[string]bool{}
	for i, tr := range trials {
		if tr.State != store.TrialInterrupted {
			continue
		}
		key := configOf(tr.Config).Key()
		if listed[key] {
			continue // interrupted again when it was redone
		}
		done := false
		for _, later := range trials[i+1:] {
			if later.State.Terminal() && later.State != store.TrialInterrupted && configOf(later.Config).Key() == key {
				done = true
				break
			}
		}
		if !done {
			out = append(out, tr)
			listed[key] = true
		}
	}
	return out
}

// stopping reports whether the run must not start another trial.
func (t *Tuner) stopping(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	select {
	case <-t.drain:
		return true
	default:
		return false
	}
}
