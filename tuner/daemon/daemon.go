package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// Why a run was queued.
const (
	ReasonResume   = "resume"   // an unfinished run found at startup
	ReasonSchedule = "schedule" // the study's cron expression came due
	ReasonAPI      = "api"      // triggered through the API
)

// Study states as the API reports them.
const (
	StateIdle    = "idle"
	StateQueued  = "queued"
	StateRunning = "running"
)

// maxWait caps one sleep of the scheduler, so that a clock that jumps (a
// suspended machine, a corrected wall clock) is noticed within it.
const maxWait = time.Minute

// Options configure a Daemon. The zero value is usable.
type Options struct {
	// Logger receives the daemon's records; nil discards them.
	Logger *slog.Logger
	// Clock is the scheduler's clock; nil is the system clock.
	Clock Clock
	// Runner runs one study once; nil is a TunerRunner over the daemon's
	// store with StateDir, Cores, GPUs and Logger.
	Runner Runner
	// StateDir holds the runtimes' per-study state ("" for their default).
	StateDir string
	// Cores and GPUs are what the tuned servers see; Cores defaults to
	// this machine's.
	Cores, GPUs int
	// Checks are run over every study on load, after its own validation
	// (the space and strategy as the tuner builds them, the files it names).
	Checks []configs.StudyCheck
	// MaxParallel bounds the runs in progress at once, whatever their
	// targets; default 1, because the load generator shares this machine
	// with every run and two measurements at once disturb each other.
	// Runs against conflicting targets never overlap, whatever it is.
	MaxParallel int
}

// Daemon runs studies on their schedules: it loads the study files of a
// directory, queues each study when its cron expression comes due (or the
// API asks), and runs the queue so that no two runs ever restart the same
// server at once. The store is the source of truth: a restarted daemon
// resumes the runs a stop left unfinished, before anything else.
//
// Build it with New, serve its Handler, call Run. Reload re-reads the
// directory (on SIGHUP). All methods are safe for concurrent use.
type Daemon struct {
	dir         string
	db          *store.DB
	log         *slog.Logger
	clock       Clock
	runner      Runner
	checks      []configs.StudyCheck
	maxParallel int
	m           *metrics

	// kick wakes the scheduling loop: a job ended, one was queued, the
	// studies were reloaded.
	kick chan struct{}

	mu       sync.Mutex
	studies  map[string]*studyState
	problems []LoadProblem
	loadedAt time.Time
	queue    []*job
	running  map[string]*job // by study
	nextJob  uint64
	phase    phase
}

type phase int

const (
	phaseNew      phase = iota // built, Run not called yet
	phaseServing               // Run is scheduling
	phaseDraining              // Run is waiting for the runs in progress to end
	phaseStopped               // Run returned
)

// studyState is what the daemon knows of one loaded study beyond the store.
type studyState struct {
	loadedStudy
	next time.Time // zero for an on-demand study
	// removed is set when a reload dropped the study while it ran; it is
	// forgotten when the run ends.
	removed bool

	lastOutcome  string
	lastError    string
	lastDecision *tuner.Decision
	lastRollout  *RolloutResult
	degraded     bool
	degradation  float64
}

// job is one queued or running run of a study.
type job struct {
	id     uint64
	study  string
	reason string
	opts   tuner.RunOptions
	queued time.Time

	// Set when it starts.
	started   time.Time
	spec      *configs.Study
	target    Target
	cancel    context.CancelFunc
	cancelled bool
	progress  Progress
	best      *float64
}

// Progress is where a running run stands, from the tuner's events.
type Progress struct {
	Job     uint64    `json:"job"`
	Reason  string    `json:"reason"`
	Started time.Time `json:"started"`
	// Run is the store's run ID, 0 until the tuner has opened the run.
	Run   uint64 `json:"run,omitempty"`
	Stage string `json:"stage,omitempty"`
	// Index and Total are the trial's position in its stage.
	Index      int              `json:"index,omitempty"`
	Total      int              `json:"total,omitempty"`
	Trial      uint64           `json:"trial,omitempty"`
	TrialState store.TrialState `json:"trial_state,omitempty"`
	// Best is the best feasible objective of the run so far.
	Best    *float64 `json:"best,omitempty"`
	Message string   `json:"message,omitempty"`
}

// QueuedRun is a run waiting in the queue.
type QueuedRun struct {
	Job       uint64    `json:"job"`
	Study     string    `json:"study"`
	Reason    string    `json:"reason"`
	Queued    time.Time `json:"queued"`
	Budget    int       `json:"budget,omitempty"`
	WarmStart bool      `json:"warm_start"`
	// Position is 1 for the run at the head of the queue.
	Position int `json:"position"`
}

// New loads the studies of dir (every *.yaml and *.yml file; a file that
// does not load is reported by Problems and skipped) into a daemon that
// keeps its runs in db. Only an unreadable directory is an error.
func New(db *store.DB, dir string, o *Options) (*Daemon, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.Cores <= 0 {
		opts.Cores = goruntime.NumCPU()
	}
	if opts.Runner == nil {
		opts.Runner = &TunerRunner{DB: db, StateDir: opts.StateDir, Cores: opts.Cores, GPUs: opts.GPUs, Logger: opts.Logger}
	}
	if opts.MaxParallel <= 0 {
		opts.MaxParallel = 1
	}
	d := &Daemon{
		dir: dir, db: db, log: opts.Logger, clock: opts.Clock, runner: opts.Runner,
		checks: opts.Checks, maxParallel: opts.MaxParallel, m: newMetrics(),
		kick:    make(chan struct{}, 1),
		studies: map[string]*studyState{},
		running: map[string]*job{},
	}
	if _, err := d.Reload(context.Background()); err != nil {
		return nil, err
	}
	return d, nil
}

// wake makes the scheduling loop look at the queue again.
func (d *Daemon) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

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

// Run schedules and runs the studies until drain is closed or ctx ends.
//
// It first queues the runs the store holds unfinished (a stop or a crash
// interrupted them; the tuner resumes each where it stopped), then, as
// each study comes due, a scheduled run: kind scheduled, warm-started,
// the tuner's budget for it (schedule.trials once there is an incumbent).
// A study due while it is already queued is not queued twice.
//
// Closing drain stops it gracefully: nothing new starts, the trials in
// progress finish, their servers are restored and their runs are left
// resumable; Run returns once they have. Cancelling ctx aborts the trials
// in progress instead (the servers are still restored). Queued runs that
// had not started are dropped: the schedule and the store bring them back.
func (d *Daemon) Run(ctx context.Context, drain <-chan struct{}) error {
	d.mu.Lock()
	if d.phase != phaseNew {
		d.mu.Unlock()
		return ErrRunning
	}
	d.phase = phaseServing
	d.mu.Unlock()

	d.queueUnfinished(ctx)

	var wg sync.WaitGroup
	done := ctx.Done()
	for {
		d.mu.Lock()
		now := d.clock.Now()
		var wake time.Time
		if d.phase == phaseServing {
			d.queueDue(now)
			d.dispatch(ctx, drain, &wg)
			wake = d.nextWake(now)
		}
		finished := d.phase == phaseDraining && len(d.running) == 0
		d.mu.Unlock()
		if finished {
			break
		}

		var timer Timer
		var fire <-chan time.Time
		if !wake.IsZero() {
			timer = d.clock.TimerAt(wake)
			fire = timer.C()
		}
		select {
		case <-fire:
		case <-d.kick:
		case <-drain:
			drain = nil
			d.beginDrain("graceful stop: finishing the trials in progress")
		case <-done:
			done = nil
			drain = nil
			d.beginDrain("abort: stopping the trials in progress")
		}
		if timer != nil {
			timer.Stop()
		}
	}
	wg.Wait()
	d.mu.Lock()
	d.phase = phaseStopped
	d.mu.Unlock()
	d.log.Info("daemon stopped")
	return nil
}

// beginDrain stops scheduling and drops the queue.
func (d *Daemon) beginDrain(why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase != phaseServing {
		return
	}
	d.phase = phaseDraining
	for _, j := range d.queue {
		d.log.Info("queued run dropped by the stop", "study", j.study, "reason", j.reason)
	}
	d.queue = nil
	d.m.queued.Set(0)
	running := make([]string, 0, len(d.running))
	for name := range d.running {
		running = append(running, name)
	}
	slices.Sort(running)
	d.log.Info("stopping", "why", why, "running", running)
}

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
			opts := tuner.RunOptions{Kind: r.Kind, Budget: r.Budget, WarmStart: r.Kind == store.KindScheduled}
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

// execute runs job j and records how it ended. It runs on a goroutine of
// its own; the job's target stays reserved until it returns, rollout
// included.
func (d *Daemon) execute(ctx context.Context, j *job) {
	log := d.log.With("study", j.study, "job", j.id, "reason", j.reason)
	log.Info("run starting", "target", j.target.String(), "warm_start", j.opts.WarmStart, "budget", j.opts.Budget)
	rep, err := d.runner.Run(ctx, j.spec, j.opts, func(e tuner.Event) { d.observe(j, e) })

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

// rollout runs the study's rollout command after an accepted change and
// records its result beside the recommendation.
func (d *Daemon) rollout(ctx context.Context, j *job, rep *tuner.Report, log *slog.Logger) *RolloutResult {
	sc := j.spec.Schedule
	if len(sc.Rollout) == 0 {
		return nil
	}
	rec := rep.Recommendation
	env := []string{
		"BATCHTUNE_STUDY=" + j.study,
		"BATCHTUNE_RUN=" + strconv.FormatUint(rep.Run.ID, 10),
		"BATCHTUNE_RECOMMENDATION=" + strconv.FormatUint(rec.Seq, 10),
	}
	if fp := j.spec.Export.FlagsPath; fp != "" {
		env = append(env, "BATCHTUNE_FLAGS_FILE="+fp)
	}
	log.Info("rollout starting", "argv", append(append([]string(nil), sc.Rollout...), j.spec.Export.Path), "timeout", sc.RolloutTimeout.D())
	res := runRollout(ctx, sc.Rollout, j.spec.Export.Path, sc.RolloutTimeout.D(), env)
	res.Recommendation = rec.Seq
	d.m.rollouts.WithLabelValues(j.study, res.Result).Inc()
	if res.Result == RolloutOK {
		log.Info("rollout done", "duration", res.Duration, "output", res.Output)
	} else {
		log.Error("rollout failed", "result", res.Result, "exit_code", res.ExitCode, "error", res.Error, "output", res.Output)
	}
	note := fmt.Sprintf("rollout %s (exit %d, %s)", res.Result, res.ExitCode, res.Duration.Round(time.Millisecond))
	if res.Error != "" {
		note += ": " + res.Error
	}
	r := *rec
	if r.Note != "" {
		r.Note += "; "
	}
	r.Note += note
	if err := d.db.PutRecommendation(context.WithoutCancel(ctx), &r); err != nil {
		log.Error("recording the rollout", "err", err)
	}
	return &res
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
	j := d.enqueue(study, ReasonAPI, tuner.RunOptions{Kind: store.KindScheduled, Budget: t.Budget, WarmStart: warm})
	d.wake()
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
	return QueuedRun{Job: j.id, Study: j.study, Reason: j.reason, Queued: j.queued, Budget: j.opts.Budget, WarmStart: j.opts.WarmStart, Position: pos}
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
