package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// Trigger queues a run of study now (it starts as soon as its target is
// free). A run already queued for the study is ErrAlreadyQueued; one in
// progress is no obstacle, the new one runs after it.
func (d *Daemon) Trigger(study string, t TriggerOptions) (*QueuedRun, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase == phaseDraining || d.phase == phaseStopped {
		return nil, ErrDraining
	}
	st := d.studies[study]
	if st == nil || st.removed {
		return nil, fmt.Errorf("%w: %s", ErrUnknownStudy, study)
	}
	if j := d.queuedJob(study); j != nil {
		return nil, fmt.Errorf("%w (job %d, %s)", ErrAlreadyQueued, j.id, j.reason)
	}
	warm := true
	if t.WarmStart != nil {
		warm = *t.WarmStart
	}
	j := d.enqueue(study, ReasonAPI, tuner.RunOptions{Kind: store.KindAPI, Budget: t.Budget, WarmStart: warm})
	// Start it now when it may start, so that the answer says where it
	// truly stands: running, or its place among the runs still waiting.
	if d.phase == phaseServing && d.loop != nil {
		d.dispatch(d.loop.ctx, d.loop.drain, d.loop.wg)
	}
	d.wake()
	if d.running[study] == j {
		return &QueuedRun{Job: j.id, Study: j.study, Reason: j.reason, Queued: j.queued, Budget: j.opts.Budget,
			WarmStart: j.opts.WarmStart, State: StateRunning}, nil
	}
	q := d.queuedRun(j)
	return &q, nil
}

// TriggerOptions vary a run triggered through the API.
type TriggerOptions struct {
	// Budget is the search's trial budget; 0 lets the tuner choose
	// (schedule.trials for a warm start with an incumbent, else
	// search.trials).
	Budget int `json:"budget,omitempty"`
	// WarmStart: re-tune against the incumbent (the default) or, false,
	// run a fresh search that recommends whatever wins.
	WarmStart *bool `json:"warm_start,omitempty"`
}

// queuedRun describes j; d.mu is held.
func (d *Daemon) queuedRun(j *job) QueuedRun {
	pos := slices.Index(d.queue, j) + 1
	return QueuedRun{Job: j.id, Study: j.study, Reason: j.reason, Queued: j.queued, Budget: j.opts.Budget, WarmStart: j.opts.WarmStart,
		State: StateQueued, Position: pos}
}

// CancelResult says what a Cancel stopped.
type CancelResult struct {
	Study string `json:"study"`
	// What is "queued" (a run that had not started was dropped),
	// "running" (the run in progress is being aborted: its trial stops,
	// the server is restored, and the run is closed, not resumed), or
	// "unfinished" (a run left unfinished in the store was closed so that
	// it is not resumed).
	What string `json:"what"`
	Job  uint64 `json:"job,omitempty"`
	Run  uint64 `json:"run,omitempty"`
}

// Cancel stops a run of study. run is the store's run ID, or 0 for
// whatever the study is doing: its run in progress, else its queued run.
func (d *Daemon) Cancel(ctx context.Context, study string, run uint64) (*CancelResult, error) {
	d.mu.Lock()
	st := d.studies[study]
	if st == nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrUnknownStudy, study)
	}
	if j := d.running[study]; j != nil && (run == 0 || j.progress.Run == run || j.progress.Run == 0) {
		j.cancelled = true
		res := &CancelResult{Study: study, What: StateRunning, Job: j.id, Run: j.progress.Run}
		d.mu.Unlock()
		// Outside the lock: whatever the cancellation sets off in the
		// tuner may report back through observe, which takes it.
		j.cancel()
		d.log.Info("run cancelled through the API", "study", study, "job", j.id, "run", res.Run)
		return res, nil
	}
	if run == 0 {
		defer d.mu.Unlock()
		if j := d.queuedJob(study); j != nil {
			d.queue = slices.DeleteFunc(d.queue, func(q *job) bool { return q == j })
			d.m.queued.Set(float64(len(d.queue)))
			d.log.Info("queued run cancelled through the API", "study", study, "job", j.id)
			return &CancelResult{Study: study, What: StateQueued, Job: j.id}, nil
		}
		return nil, fmt.Errorf("%w: study %s is neither running nor queued", ErrNothingToCancel, study)
	}
	d.mu.Unlock()

	r, err := d.db.Run(ctx, study, run)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: run %d of study %s", ErrRunNotFound, run, study)
	}
	if err != nil {
		return nil, err
	}
	if !r.State.Unfinished() {
		return nil, fmt.Errorf("%w: run %d of study %s is %s", ErrNothingToCancel, run, study, r.State)
	}
	// Closed in the store, a queued resume of it would start afresh:
	// drop that too.
	d.mu.Lock()
	if j := d.queuedJob(study); j != nil && j.reason == ReasonResume {
		d.queue = slices.DeleteFunc(d.queue, func(q *job) bool { return q == j })
		d.m.queued.Set(float64(len(d.queue)))
	}
	d.mu.Unlock()
	if err := d.abandon(ctx, study, run, "cancelled through the API while unfinished"); err != nil {
		return nil, err
	}
	d.log.Info("unfinished run cancelled through the API", "study", study, "run", run)
	return &CancelResult{Study: study, What: "unfinished", Run: run}, nil
}

// Ready reports whether the daemon is scheduling, and why not.
func (d *Daemon) Ready() (bool, string) {
	if err := d.db.Corrupt(); err != nil {
		return false, err.Error()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.phase {
	case phaseNew:
		return false, "starting"
	case phaseDraining:
		return false, "shutting down"
	case phaseStopped:
		return false, "stopped"
	}
	return true, "ok"
}
