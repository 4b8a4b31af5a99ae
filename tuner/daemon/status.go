package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// StudyStatus is what the daemon says of one study: its schedule and
// state, what it is doing, how its last run ended, and its incumbent.
type StudyStatus struct {
	Name   string `json:"name"`
	File   string `json:"file"`
	Target string `json:"target"`
	// State is StateIdle, StateQueued or StateRunning.
	State    string          `json:"state"`
	Schedule *ScheduleStatus `json:"schedule,omitempty"`
	// Current is the run in progress; Queued the run waiting.
	Current *Progress  `json:"current,omitempty"`
	Queued  *QueuedRun `json:"queued,omitempty"`
	// LastRun is the study's latest run in the store (any process's).
	LastRun *store.Run `json:"last_run,omitempty"`
	// Incumbent is the latest accepted recommendation: what is in
	// production as far as batchtune knows.
	Incumbent *store.Recommendation `json:"incumbent,omitempty"`
	// LastOutcome is how this daemon's latest run of the study ended
	// (recommended, kept, no_feasible, error, interrupted, cancelled), and
	// LastError the error of a run that failed.
	LastOutcome string `json:"last_outcome,omitempty"`
	LastError   string `json:"last_error,omitempty"`
	// LastDecision is the latest warm start's verdict on the incumbent.
	LastDecision *tuner.Decision `json:"last_decision,omitempty"`
	// Degraded is set when the latest warm start found the incumbent
	// degraded past the study's threshold; Degradation is its relative
	// loss (positive is worse).
	Degraded    bool           `json:"degraded"`
	Degradation float64        `json:"degradation"`
	LastRollout *RolloutResult `json:"last_rollout,omitempty"`
	// Removed: the study's file is gone; it is dropped once its run ends.
	Removed bool `json:"removed,omitempty"`
}

// ScheduleStatus is a study's schedule and when it is next due.
type ScheduleStatus struct {
	Cron     string    `json:"cron"`
	TimeZone string    `json:"time_zone"`
	Next     time.Time `json:"next,omitzero"`
}

// StudiesStatus is the daemon's view of every loaded study.
type StudiesStatus struct {
	Studies  []StudyStatus `json:"studies"`
	Problems []LoadProblem `json:"problems"`
	Loaded   time.Time     `json:"loaded"`
	Queue    []QueuedRun   `json:"queue"`
}

// Studies returns the status of every loaded study, in name order, with
// the study files that did not load.
func (d *Daemon) Studies(ctx context.Context) (*StudiesStatus, error) {
	d.mu.Lock()
	names := make([]string, 0, len(d.studies))
	for name := range d.studies {
		names = append(names, name)
	}
	out := &StudiesStatus{Problems: slices.Clone(d.problems), Loaded: d.loadedAt, Queue: make([]QueuedRun, 0, len(d.queue))}
	for _, j := range d.queue {
		out.Queue = append(out.Queue, d.queuedRun(j))
	}
	d.mu.Unlock()
	if out.Problems == nil {
		out.Problems = []LoadProblem{}
	}
	slices.Sort(names)
	out.Studies = make([]StudyStatus, 0, len(names))
	for _, name := range names {
		s, err := d.Study(ctx, name)
		if errors.Is(err, ErrUnknownStudy) {
			continue // dropped meanwhile
		}
		if err != nil {
			return nil, err
		}
		out.Studies = append(out.Studies, *s)
	}
	return out, nil
}

// Study returns one study's status; ErrUnknownStudy when it is not loaded.
func (d *Daemon) Study(ctx context.Context, name string) (*StudyStatus, error) {
	d.mu.Lock()
	st := d.studies[name]
	if st == nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrUnknownStudy, name)
	}
	s := &StudyStatus{
		Name: name, File: st.file, Target: st.target.String(), State: StateIdle,
		LastOutcome: st.lastOutcome, LastError: st.lastError, LastDecision: st.lastDecision,
		Degraded: st.degraded, Degradation: st.degradation, LastRollout: st.lastRollout, Removed: st.removed,
	}
	if st.sched != nil {
		s.Schedule = &ScheduleStatus{Cron: st.sched.Cron, TimeZone: st.sched.Location.String(), Next: st.next}
	}
	if j := d.queuedJob(name); j != nil {
		q := d.queuedRun(j)
		s.Queued, s.State = &q, StateQueued
	}
	if j := d.running[name]; j != nil {
		p := j.progress
		s.Current, s.State = &p, StateRunning
	}
	d.mu.Unlock()

	runs, err := d.db.Runs(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if len(runs) > 0 {
		s.LastRun = &runs[len(runs)-1]
	}
	inc, err := d.db.Incumbent(ctx, name)
	switch {
	case err == nil:
		s.Incumbent = inc
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return s, nil
}

// known reports whether a study is loaded.
func (d *Daemon) known(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.studies[name] != nil
}

// RunDetail is one run with its trials.
type RunDetail struct {
	Run    store.Run     `json:"run"`
	Trials []store.Trial `json:"trials"`
}
