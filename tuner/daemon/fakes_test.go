package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/atomicfile"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// fakeClock is a Clock whose time moves only when the test says.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

var _ daemon.Clock = (*fakeClock)(nil)

type fakeTimer struct {
	clk *fakeClock
	at  time.Time
	c   chan time.Time
	off bool
}

func newFakeClock(start time.Time) *fakeClock { return &fakeClock{now: start} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) TimerAt(at time.Time) daemon.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clk: c, at: at, c: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.c <- c.now
		t.off = true
	} else {
		c.timers = append(c.timers, t)
	}
	return t
}

// Set moves the clock to at, firing every timer due by then.
func (c *fakeClock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.off:
		case !t.at.After(at):
			t.c <- at
			t.off = true
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	was := !t.off
	t.off = true
	return was
}

// fakeRunner is a Runner that does what tuner.Run does to the store (a
// run, trials at each state change, a recommendation, the run's end) and
// to the events, but measures nothing: the test decides how each run ends.
type fakeRunner struct {
	db      *store.DB
	started chan *fakeRun

	mu        sync.Mutex
	active    map[string]int // by target
	maxActive map[string]int
	total     int
	maxTotal  int
}

var _ daemon.Runner = (*fakeRunner)(nil)

func newFakeRunner(db *store.DB) *fakeRunner {
	return &fakeRunner{db: db, started: make(chan *fakeRun, 64), active: map[string]int{}, maxActive: map[string]int{}}
}

// fakeRun is one call of fakeRunner.Run, in progress.
type fakeRun struct {
	Study   *configs.Study
	Opts    tuner.RunOptions
	Ctx     context.Context
	run     store.Run
	trial   store.Trial
	observe func(tuner.Event)
	end     chan ending
	// ctxErr is the run context's error when the run ended.
	ctxErr error
}

// ending says how a fake run ends.
type ending struct {
	outcome   store.Outcome
	objective float64
	accepted  bool
	decision  *tuner.Decision
	rejected  string // the reason of a rejected trial to record, "" for none
	err       error
}

func (f *fakeRunner) Run(ctx context.Context, s *configs.Study, ro tuner.RunOptions, observe func(tuner.Event)) (*tuner.Report, error) {
	key := daemon.TargetOf(s.Target).String()
	f.mu.Lock()
	f.active[key]++
	f.total++
	f.maxActive[key] = max(f.maxActive[key], f.active[key])
	f.maxTotal = max(f.maxTotal, f.total)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active[key]--
		f.total--
		f.mu.Unlock()
	}()

	wctx := context.WithoutCancel(ctx)
	if err := f.db.PutStudy(wctx, &store.Study{Name: s.Name, SpecHash: s.Hash(), Spec: string(s.Source)}); err != nil {
		return nil, err
	}
	r := &fakeRun{Study: s, Opts: ro, Ctx: ctx, observe: observe, end: make(chan ending, 1)}
	if prev, err := f.db.LatestUnfinishedRun(wctx, s.Name); err == nil && prev.SpecHash == s.Hash() {
		r.run = *prev
		r.run.State = store.RunRunning
		if err := f.db.PutRun(wctx, &r.run); err != nil {
			return nil, err
		}
	} else {
		r.run = store.Run{Study: s.Name, Kind: ro.Kind, State: store.RunRunning, SpecHash: s.Hash(), Started: time.Now().UTC(), Budget: ro.Budget}
		if err := f.db.CreateRun(wctx, &r.run); err != nil {
			return nil, err
		}
	}
	observe(tuner.Event{Time: time.Now(), Run: r.run.ID, Message: "run started"})
	r.trial = store.Trial{Study: s.Name, Run: r.run.ID, Role: store.RoleSearch, State: store.TrialSuggested,
		Config: []store.Param{{Name: "max_batch_size", Value: 16}, {Name: "batch_timeout_micros", Value: 0}}}
	if err := f.put(r, &r.trial, true, store.TrialSuggested, store.TrialStarting, store.TrialWarming, store.TrialMeasuring); err != nil {
		return nil, err
	}
	f.started <- r

	var e ending
	select {
	case e = <-r.end:
	case <-ctx.Done():
		e = ending{err: tuner.ErrInterrupted}
	case <-ro.Drain:
		// A graceful stop lets the trial in progress finish.
		e = ending{err: tuner.ErrInterrupted, objective: 100}
	}
	r.ctxErr = ctx.Err()
	return f.finish(r, e)
}

// put stores tr through states, reporting each like the tuner.
func (f *fakeRunner) put(r *fakeRun, tr *store.Trial, add bool, states ...store.TrialState) error {
	ctx := context.Background()
	for i, s := range states {
		tr.Transition(s, time.Now().UTC())
		var err error
		if add && i == 0 {
			err = f.db.AddTrial(ctx, tr)
		} else {
			err = f.db.PutTrial(ctx, tr)
		}
		if err != nil {
			return err
		}
		cp := *tr
		r.observe(tuner.Event{Time: time.Now(), Run: r.run.ID, Stage: tuner.StageSearch, Index: 1, Total: 1, Trial: &cp})
	}
	return nil
}

func (f *fakeRunner) finish(r *fakeRun, e ending) (*tuner.Report, error) {
	ctx := context.Background()
	rep := &tuner.Report{Study: r.Study.Name, Decision: e.decision}
	if e.err != nil && e.objective == 0 {
		r.trial.Reason = "interrupted"
		if err := f.put(r, &r.trial, false, store.TrialInterrupted); err != nil {
			return nil, err
		}
	} else {
		obj := e.objective
		r.trial.Objective, r.trial.Feasible = &obj, true
		r.trial.Summary = store.Summary{Throughput: obj}
		if err := f.put(r, &r.trial, false, store.TrialSucceeded); err != nil {
			return nil, err
		}
	}
	if e.rejected != "" {
		rej := store.Trial{Study: r.Study.Name, Run: r.run.ID, Role: store.RoleSearch, State: store.TrialRejected, Reason: e.rejected,
			Config: []store.Param{{Name: "max_batch_size", Value: 16}, {Name: "batch_timeout_micros", Value: 90000}}}
		if err := f.db.AddTrial(ctx, &rej); err != nil {
			return nil, err
		}
		cp := rej
		r.observe(tuner.Event{Time: time.Now(), Run: r.run.ID, Stage: tuner.StageSearch, Trial: &cp})
	}
	switch {
	case e.err != nil:
		r.run.State, r.run.Detail = store.RunInterrupted, "interrupted"
	default:
		r.run.State, r.run.Outcome, r.run.Ended = store.RunFinished, e.outcome, time.Now().UTC()
		e.decision.Record(&r.run)
	}
	if e.err == nil && (e.outcome == store.OutcomeRecommended || e.outcome == store.OutcomeKept) && e.objective > 0 {
		rec := &store.Recommendation{Study: r.Study.Name, Run: r.run.ID, Config: r.trial.Config,
			Batching: "max_batch_size { value: 16 }\n", Objective: e.objective, Accepted: e.accepted}
		if err := f.db.AddRecommendation(ctx, rec); err != nil {
			return nil, err
		}
		rep.Recommendation = rec
		r.run.Recommendation = rec.Seq
		if e.accepted {
			if err := atomicfile.Write(r.Study.Export.Path, []byte(rec.Batching), 0o644); err != nil {
				return nil, err
			}
			rep.Exported = []string{r.Study.Export.Path}
		}
	}
	if err := f.db.PutRun(ctx, &r.run); err != nil {
		return nil, err
	}
	rep.Run = r.run
	rep.Trials, _ = f.db.Trials(ctx, r.Study.Name, r.run.ID)
	return rep, e.err
}

// next waits for the next run to start.
func (f *fakeRunner) next(t *testing.T) *fakeRun {
	t.Helper()
	select {
	case r := <-f.started:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no run started within 20s")
		return nil
	}
}

// none asserts that no run starts within a short while.
func (f *fakeRunner) none(t *testing.T, why string) {
	t.Helper()
	select {
	case r := <-f.started:
		t.Fatalf("%s: run of %s started (reason %+v)", why, r.Study.Name, r.Opts)
	case <-time.After(150 * time.Millisecond):
	}
}

func (r *fakeRun) finishWith(e ending) { r.end <- e }

// studyDoc is a small valid study file; the fake runner never starts its
// server, so the binary and model need not exist.
func studyDoc(name, binary string, grpc, rest int, cron, tz, export string, rollout ...string) string {
	doc := fmt.Sprintf(`name: %s
target:
  runtime: process
  model: {name: m, base_path: /models/m}
  ports: {grpc: %d, rest: %d}
  process: {binary: %s}
slo: {latency: 100ms}
export: {path: %s}
schedule:
  cron: %q
  time_zone: %s
  trials: 3
`, name, grpc, rest, binary, export, cron, tz)
	if len(rollout) > 0 {
		doc += "  rollout: [" + strings.Join(rollout, ", ") + "]\n  rollout_timeout: 10s\n"
	}
	return doc
}

// rig is a daemon over a test store, a studies directory, a fake clock
// and a fake runner.
type rig struct {
	t      *testing.T
	dir    string
	out    string // a directory for exports and rollout effects
	db     *store.DB
	clock  *fakeClock
	runner *fakeRunner
	logs   *syncBuffer
	d      *daemon.Daemon

	drain  chan struct{}
	cancel context.CancelFunc
	done   chan error
}

func newRig(t *testing.T, start time.Time, files map[string]string, opts *daemon.Options) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), out: t.TempDir(), db: storetest.Open(t), clock: newFakeClock(start), logs: &syncBuffer{}}
	for name, body := range files {
		r.write(name, body)
	}
	r.runner = newFakeRunner(r.db)
	var o daemon.Options
	if opts != nil {
		o = *opts
	}
	o.Clock, o.Runner = r.clock, r.runner
	o.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := daemon.New(r.db, r.dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	return r
}

func (r *rig) write(name, body string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// start runs the daemon until the test ends (gracefully: drain).
func (r *rig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.drain, r.cancel, r.done = make(chan struct{}), cancel, make(chan error, 1)
	go func() { r.done <- r.d.Run(ctx, r.drain) }()
	r.t.Cleanup(func() {
		r.stop(false)
		if r.t.Failed() {
			r.t.Logf("daemon log:\n%s", r.logs.String())
		}
	})
	r.waitFor("the daemon to be ready", func() bool { ok, _ := r.d.Ready(); return ok })
}

// stop stops the daemon, gracefully or by aborting, and waits for Run.
func (r *rig) stop(abort bool) {
	if r.done == nil {
		return
	}
	if abort {
		r.cancel()
	} else {
		select {
		case <-r.drain:
		default:
			close(r.drain)
		}
	}
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		r.t.Fatal("Run did not return within 20s of the stop")
	}
	r.done = nil
	r.cancel()
}

// waitFor polls cond until it holds.
func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// status returns one study's status.
func (r *rig) status(name string) *daemon.StudyStatus {
	r.t.Helper()
	s, err := r.d.Study(context.Background(), name)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *rig) state(name string) string { return r.status(name).State }

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
