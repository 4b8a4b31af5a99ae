package daemon

import (
	"context"
	"log/slog"
	goruntime "runtime"
	"slices"
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
	// loop is what dispatch needs from Run, set while Run serves, so that
	// Trigger can start a run at once and answer where it truly stands.
	loop *loopState
}

// loopState is Run's context, drain channel and wait group.
type loopState struct {
	ctx   context.Context
	drain <-chan struct{}
	wg    *sync.WaitGroup
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
	// State is StateQueued, or StateRunning for a triggered run that
	// started at once (its Position is then 0).
	State string `json:"state"`
	// Position is the run's place in the queue: 1 for the run at its
	// head, 2 behind it, and so on.
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
	d.mu.Lock()
	d.loop = &loopState{ctx: ctx, drain: drain, wg: &wg}
	d.mu.Unlock()
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
	d.phase, d.loop = phaseStopped, nil
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
