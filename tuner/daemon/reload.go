package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/batchtune/batchtune/store"
)

// ReloadResult says what a Reload changed.
type ReloadResult struct {
	Added    []string      `json:"added"`
	Updated  []string      `json:"updated"`
	Removed  []string      `json:"removed"`
	Problems []LoadProblem `json:"problems"`
}

// Reload re-reads the studies directory. New studies are scheduled from
// now; a changed study takes effect from its next run (a run in progress
// finishes with the spec it started with); a study whose file is gone is
// dropped (after its run in progress, if any). A file that no longer loads
// is reported and its study keeps its previous version. An unreadable
// directory changes nothing and is returned as an error.
func (d *Daemon) Reload(ctx context.Context) (ReloadResult, error) {
	loaded, problems, err := loadStudies(d.dir, d.checks)
	if err != nil {
		return ReloadResult{}, err
	}
	if problems == nil {
		problems = []LoadProblem{}
	}
	res := ReloadResult{Added: []string{}, Updated: []string{}, Removed: []string{}}

	d.mu.Lock()
	now := d.clock.Now()
	keep := map[string]bool{}
	for _, ls := range loaded {
		keep[ls.study.Name] = true
	}
	// A study whose file broke keeps its last good version.
	bad := problemFiles(problems)
	for name, st := range d.studies {
		if p, ok := bad[st.file]; ok && !keep[name] && !st.removed {
			keep[name] = true
			p.Kept = name
			loaded = append(loaded, st.loadedStudy)
		}
	}
	var added []string
	for _, ls := range loaded {
		name := ls.study.Name
		st, ok := d.studies[name]
		switch {
		case !ok:
			st = &studyState{loadedStudy: ls}
			d.studies[name] = st
			st.next = nextOf(ls.sched, now)
			res.Added = append(res.Added, name)
			added = append(added, name)
		case st.study.Hash() != ls.study.Hash() || st.file != ls.file || st.removed:
			if schedChanged(st.sched, ls.sched) || st.removed {
				st.next = nextOf(ls.sched, now)
			}
			st.loadedStudy = ls
			st.removed = false
			res.Updated = append(res.Updated, name)
		}
		d.m.setNextRun(name, st.next)
	}
	for name, st := range d.studies {
		if keep[name] || st.removed {
			continue
		}
		res.Removed = append(res.Removed, name)
		d.queue = slices.DeleteFunc(d.queue, func(j *job) bool { return j.study == name })
		if _, running := d.running[name]; running {
			st.removed = true
			st.next = time.Time{}
			d.m.setNextRun(name, time.Time{})
			continue
		}
		delete(d.studies, name)
		d.m.dropStudy(name)
	}
	d.problems = problems
	d.loadedAt = now
	d.m.queued.Set(float64(len(d.queue)))
	d.m.loadProblems.Set(float64(len(problems)))
	d.mu.Unlock()

	for _, name := range added {
		d.m.addStudy(name)
		d.initMetrics(ctx, name)
	}
	slices.Sort(res.Added)
	slices.Sort(res.Updated)
	slices.Sort(res.Removed)
	res.Problems = problems
	for _, p := range problems {
		d.log.Warn("study file skipped", "file", p.File, "error", p.Error, "kept", p.Kept)
	}
	d.log.Info("studies loaded", "dir", d.dir, "added", res.Added, "updated", res.Updated, "removed", res.Removed, "problems", len(problems))
	d.wake()
	return res, nil
}

func nextOf(s *Schedule, now time.Time) time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.Next(now)
}

func schedChanged(a, b *Schedule) bool {
	if a == nil || b == nil {
		return a != b
	}
	return a.Cron != b.Cron || a.Location.String() != b.Location.String()
}

// initMetrics sets what outlives a daemon from the store: the incumbent's
// objective, when the last successful run ended, and whether the latest
// run that measured the incumbent found it degraded (gauges and status).
func (d *Daemon) initMetrics(ctx context.Context, name string) {
	if inc, err := d.db.Incumbent(ctx, name); err == nil {
		d.m.incumbentObj.WithLabelValues(name).Set(inc.Objective)
	}
	runs, err := d.db.Runs(ctx, name)
	if err != nil {
		return
	}
	if r := store.LastIncumbentCheck(runs); r != nil {
		d.m.degradation.WithLabelValues(name).Set(*r.Degradation)
		d.m.degraded.WithLabelValues(name).Set(b2f(r.Degraded))
		d.mu.Lock()
		if st := d.studies[name]; st != nil {
			st.degraded, st.degradation = r.Degraded, *r.Degradation
		}
		d.mu.Unlock()
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.State == store.RunFinished && (r.Outcome == store.OutcomeRecommended || r.Outcome == store.OutcomeKept) {
			d.m.lastSuccess.WithLabelValues(name).Set(float64(r.Ended.UnixNano()) / 1e9)
			return
		}
	}
}
