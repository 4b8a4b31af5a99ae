package tuner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// stopTimeout bounds stopping a trial's server on a context of its own.
const stopTimeout = 30 * time.Second

// errServerExited cancels a trial's context when its server dies.
var errServerExited = errors.New("tuner: server exited during the trial")

// stage carries a stage's position for events.
type stage struct {
	name         string
	index, total int
	best         *float64
}

// put stores tr and reports it.
func (t *Tuner) put(ctx context.Context, tr *store.Trial, st stage, add bool) error {
	// Parallel trials store from several goroutines: one at a time, so
	// that observers see every change in the order it was stored.
	t.putMu.Lock()
	defer t.putMu.Unlock()
	var err error
	// A state change must reach the store even when the run's context is
	// being cancelled: that is how an interrupted trial is recorded.
	wctx := context.WithoutCancel(ctx)
	if add {
		err = t.db.AddTrial(wctx, tr)
	} else {
		err = t.db.PutTrial(wctx, tr)
	}
	if err != nil {
		return fmt.Errorf("store trial: %w", err)
	}
	cp := *tr
	t.observe(Event{Time: t.now(), Run: tr.Run, Stage: st.name, Index: st.index, Total: st.total, Trial: &cp, Best: st.best})
	return nil
}

// transition moves tr to state s and stores it.
func (t *Tuner) transition(ctx context.Context, tr *store.Trial, s store.TrialState, st stage) error {
	tr.Transition(s, t.now().UTC())
	return t.put(ctx, tr, st, false)
}

// runTrial runs one trial that is already stored as suggested: restart the
// server with launch, wait until ready, warm up, measure, score, and store
// every state on the way. It returns an error only when the store fails,
// the run's context ended (ErrInterrupted, with the trial stored as
// interrupted), or the runtime cannot start any server (a fixed port taken
// by another process); a failed trial is a result, not an error.
func (t *Tuner) runTrial(ctx context.Context, tr *store.Trial, launch runtime.Config, st stage) error {
	return t.runTrialIn(ctx, 0, tr, launch, st)
}

// runTrialIn is runTrial in one of the runtime's parallel slots. The
// server runs on the run's pinned node, if any, unless launch names one.
func (t *Tuner) runTrialIn(ctx context.Context, slot int, tr *store.Trial, launch runtime.Config, st stage) error {
	if launch.Node == "" {
		launch.Node = t.pin
	}
	if err := t.transition(ctx, tr, store.TrialStarting, st); err != nil {
		return err
	}
	log := t.log.With("run", tr.Run, "trial", tr.Seq, "role", tr.Role)
	if t.par > 1 {
		log = log.With("slot", slot)
	}
	log.Info("trial started", "config", configOf(tr.Config).String())

	srv, err := t.start(ctx, slot, launch)
	if p, ok := srv.(runtime.Placed); err == nil && ok && p.Node() != "" {
		// Stored at once: a batchtune killed before the next phase
		// still leaves where the trial ran.
		tr.Node = p.Node()
		if perr := t.put(ctx, tr, st, false); perr != nil {
			srv.Stop(context.WithoutCancel(ctx))
			return perr
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return t.interrupt(ctx, tr, st)
		}
		tr.Reason = "start: " + err.Error()
		log.Warn("trial failed", "reason", tr.Reason)
		if terr := t.transition(ctx, tr, store.TrialFailed, st); terr != nil {
			return terr
		}
		if errors.Is(err, runtime.ErrPortInUse) || errors.Is(err, runtime.ErrBusy) || errors.Is(err, runtime.ErrNotRecovered) {
			// The machine, not the configuration: no other trial can start either.
			return fmt.Errorf("trial %d: %w", tr.Seq, err)
		}
		return nil
	}
	// The trial's context ends when the server dies, so that a wait for
	// readiness or a measurement does not outlive it.
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-srv.Done():
			cancel(errServerExited)
		case <-tctx.Done():
		}
	}()

	var phaseErr error
	phase := func(s store.TrialState) {
		if phaseErr == nil {
			phaseErr = t.transition(ctx, tr, s, st)
		}
	}
	var (
		res *probe.Result
		cm  *CapacityMeasurement
	)
	if cp, ok := t.prober.(CapacityProber); ok && t.objective.Kind == objective.MaxCapacity {
		cm, err = cp.Capacity(tctx, srv.Endpoints(), phase)
	} else {
		res, err = t.prober.Trial(tctx, srv.Endpoints(), t.stopBelow(tr, st), phase)
	}
	measured := func() json.RawMessage {
		if cm != nil {
			return encodeResult(cm)
		}
		if res != nil {
			return encodeResult(res)
		}
		return nil
	}
	if cm != nil && len(cm.Search.Steps) > 0 {
		search := cm.Search
		tr.Capacity = &search
	}
	died := context.Cause(tctx) == errServerExited

	// Stop the server now, on a context of its own: the next trial must
	// not share the machine with it, and its log is wanted on failure.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	stopErr := srv.Stop(sctx)
	scancel()
	if phaseErr != nil {
		return phaseErr
	}
	exit := srv.Exit()
	switch {
	case died:
		tr.Reason = "server exited: " + exit.Reason()
		tr.LogTail = exit.Log
		tr.Measurement = measured()
		log.Warn("trial failed", "reason", tr.Reason)
		return t.transition(ctx, tr, store.TrialFailed, st)
	case ctx.Err() != nil:
		return t.interrupt(ctx, tr, st)
	case err != nil:
		tr.Reason = err.Error()
		tr.LogTail = exit.Log
		log.Warn("trial failed", "reason", tr.Reason)
		return t.transition(ctx, tr, store.TrialFailed, st)
	}
	if stopErr != nil {
		log.Warn("server stop", "err", stopErr)
	}
	if cm != nil {
		v := scoreCapacity(cm)
		tr.Objective, tr.Feasible, tr.Summary = v.Objective, v.Feasible, v.Summary
		tr.Reason = v.Reason
		tr.Measurement = measured()
		log.Info("trial ended", "state", v.State, "capacity", deref(v.Objective), "feasible", v.Feasible,
			"upper", cm.Search.Upper, "steps", len(cm.Search.Steps), "measuring", cm.Measuring, "reason", v.Reason)
		return t.transition(ctx, tr, v.State, st)
	}
	v := score(t.study, res)
	tr.Objective, tr.Feasible, tr.Summary = v.Objective, v.Feasible, v.Summary
	tr.Reason = v.Reason
	tr.Measurement = measured()
	log.Info("trial ended", "state", v.State, "objective", deref(v.Objective), "feasible", v.Feasible,
		"qps", res.QPS, "p99", res.Latency.P99, "stop", res.StopReason, "reason", v.Reason)
	return t.transition(ctx, tr, v.State, st)
}

// stopBelow is the throughput a trial must exceed to matter, for the
// probe's early stop (probe.StopDominated), or 0 for none. Only a search
// trial under max_throughput has one: the best feasible objective so far.
// Such a trial measured certainly below it cannot become the incumbent,
// and its figure only needs the precision of the windows it has; a
// confirmation or reference trial is a comparison, measured in full.
func (t *Tuner) stopBelow(tr *store.Trial, st stage) float64 {
	if tr.Role != store.RoleSearch || st.best == nil || t.objective.Kind != objective.MaxThroughput {
		return 0
	}
	return *st.best
}

// interrupt records tr as interrupted and returns ErrInterrupted.
func (t *Tuner) interrupt(ctx context.Context, tr *store.Trial, st stage) error {
	tr.Reason = "interrupted: " + context.Cause(ctx).Error()
	if err := t.transition(ctx, tr, store.TrialInterrupted, st); err != nil {
		return err
	}
	return ErrInterrupted
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
