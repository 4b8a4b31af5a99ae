package daemon

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// queueUnfinished queues a resume of every loaded study whose latest run
// the store holds unfinished with the study's current spec (a run of an
// older spec is closed by the tuner when the study next runs).
func (d *Daemon) queueUnfinished(ctx context.Context) {
	d.mu.Lock()
	names := make([]string, 0, len(d.studies))
	for name := range d.studies {
		names = append(names, name)
	}
	d.mu.Unlock()
	slices.Sort(names)
	for _, name := range names {
		r, err := d.db.LatestUnfinishedRun(ctx, name)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				d.log.Error("reading unfinished runs", "study", name, "err", err)
			}
			continue
		}
		d.mu.Lock()
		st := d.studies[name]
		if st != nil && r.SpecHash == st.study.Hash() {
			opts := tuner.RunOptions{Kind: r.Kind, Budget: r.Budget, WarmStart: r.Kind.Daemon()}
			d.enqueue(name, ReasonResume, opts)
			d.log.Info("resuming an unfinished run", "study", name, "run", r.ID, "state", r.State)
		}
		d.mu.Unlock()
	}
}

// queueDue queues every study whose schedule came due; d.mu is held.
func (d *Daemon) queueDue(now time.Time) {
	names := make([]string, 0, len(d.studies))
	for name, st := range d.studies {
		if !st.next.IsZero() && !st.next.After(now) {
			names = append(names, name)
		}
	}
	// Earliest due first; ties in name order, so the queue is reproducible.
	slices.SortFunc(names, func(a, b string) int {
		if c := d.studies[a].next.Compare(d.studies[b].next); c != 0 {
			return c
		}
		if a < b {
			return -1
		}
		return 1
	})
	for _, name := range names {
		st := d.studies[name]
		due := st.next
		st.next = st.sched.Next(now)
		d.m.setNextRun(name, st.next)
		if d.queuedJob(name) != nil {
			d.log.Debug("study due while already queued; not queued twice", "study", name, "due", due)
			continue
		}
		d.enqueue(name, ReasonSchedule, tuner.RunOptions{Kind: store.KindScheduled, WarmStart: true})
		d.log.Info("study due", "study", name, "due", due, "next", st.next)
	}
}

// enqueue appends a job; d.mu is held.
func (d *Daemon) enqueue(study, reason string, opts tuner.RunOptions) *job {
	d.nextJob++
	j := &job{id: d.nextJob, study: study, reason: reason, opts: opts, queued: d.clock.Now()}
	d.queue = append(d.queue, j)
	d.m.queued.Set(float64(len(d.queue)))
	return j
}

// queuedJob returns the study's queued job, or nil; d.mu is held.
func (d *Daemon) queuedJob(study string) *job {
	for _, j := range d.queue {
		if j.study == study {
			return j
		}
	}
	return nil
}

// nextWake is when the loop must look again: the earliest next due time,
// at most maxWait from now; d.mu is held.
func (d *Daemon) nextWake(now time.Time) time.Time {
	wake := now.Add(maxWait)
	for _, st := range d.studies {
		if !st.next.IsZero() && st.next.Before(wake) {
			wake = st.next
		}
	}
	return wake
}

// dispatch starts the queued jobs that may start: in queue order, as long
// as fewer than maxParallel run, skipping a job whose study runs already
// or whose target conflicts with a running one (a later job for another
// target may pass it). d.mu is held.
func (d *Daemon) dispatch(ctx context.Context, drain <-chan struct{}, wg *sync.WaitGroup) {
	for i := 0; i < len(d.queue) && len(d.running) < d.maxParallel; {
		j := d.queue[i]
		st := d.studies[j.study]
		if st == nil || st.removed {
			d.queue = slices.Delete(d.queue, i, i+1)
			continue
		}
		if _, busy := d.running[j.study]; busy || d.conflicts(st.target) {
			i++
			continue
		}
		d.queue = slices.Delete(d.queue, i, i+1)
		j.spec, j.target = st.study, st.target
		j.started = d.clock.Now()
		j.progress = Progress{Job: j.id, Reason: j.reason, Started: j.started}
		j.opts.Drain = drain
		jctx, cancel := context.WithCancel(ctx)
		j.cancel = cancel
		d.running[j.study] = j
		d.m.running.WithLabelValues(j.study).Set(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			d.execute(jctx, j)
		}()
	}
	d.m.queued.Set(float64(len(d.queue)))
}

// conflicts reports whether t conflicts with a running job's target; d.mu
// is held.
func (d *Daemon) conflicts(t Target) bool {
	for _, r := range d.running {
		if r.target.Conflicts(t) {
			return true
		}
	}
	return false
}
