package daemon_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/daemon"
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestScheduleRunsStudiesWhenDue drives two studies' cron schedules, in
// two time zones, with the test's clock.
func TestScheduleRunsStudiesWhenDue(t *testing.T) {
	r := newRig(t, at(t, "2026-03-27T12:00:00Z"), nil, nil)
	r.write("berlin.yaml", studyDoc("berlin", "/bin/a", 0, 0, "0 3 * * *", "Europe/Berlin", filepath.Join(r.out, "b.config")))
	r.write("utc.yaml", studyDoc("utc", "/bin/b", 0, 0, "30 2 * * *", "UTC", filepath.Join(r.out, "u.config")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	next := func(name string) string { return r.status(name).Schedule.Next.UTC().Format(time.RFC3339) }
	if got := next("berlin"); got != "2026-03-28T02:00:00Z" {
		t.Errorf("berlin next: %s, want 03:00 CET = 02:00 UTC", got)
	}
	if got := next("utc"); got != "2026-03-28T02:30:00Z" {
		t.Errorf("utc next: %s", got)
	}
	r.start()
	r.runner.none(t, "before anything is due")

	r.clock.Set(at(t, "2026-03-28T02:00:00Z"))
	run := r.runner.next(t)
	if run.Study.Name != "berlin" {
		t.Fatalf("first due: %s, want berlin", run.Study.Name)
	}
	// A scheduled run: kind scheduled, warm-started, the tuner's budget.
	if diff := cmp.Diff(tuner.RunOptions{Kind: store.KindScheduled, WarmStart: true}, run.Opts, cmpRunOptions); diff != "" {
		t.Errorf("run options (-want +got):\n%s", diff)
	}
	// After the DST change, 03:00 in Berlin is 01:00 UTC.
	if got := next("berlin"); got != "2026-03-29T01:00:00Z" {
		t.Errorf("berlin next after its run: %s, want 2026-03-29T01:00:00Z", got)
	}
	run.finishWith(ending{outcome: store.OutcomeKept, objective: 100})
	r.runner.none(t, "utc is not due before 02:30")
	r.clock.Set(at(t, "2026-03-28T02:30:00Z"))
	if run := r.runner.next(t); run.Study.Name != "utc" {
		t.Fatalf("second due: %s, want utc", run.Study.Name)
	} else {
		run.finishWith(ending{outcome: store.OutcomeKept, objective: 100})
	}
	r.waitFor("utc idle", func() bool { return r.state("utc") == daemon.StateIdle })
}

// cmpRunOptions compares RunOptions without their drain channel, and
// their Verifier by whether there is one.
var cmpRunOptions = cmp.Comparer(func(a, b tuner.RunOptions) bool {
	if (a.Verify == nil) != (b.Verify == nil) {
		return false
	}
	// A struct holding a func is not comparable: field by field.
	return a.Kind == b.Kind && a.Budget == b.Budget && a.WarmStart == b.WarmStart
})

// TestSharedTargetRunsOneAfterTheOther: studies on one target never run at
// once, while one on another target may run beside them.
func TestSharedTargetRunsOneAfterTheOther(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:00Z"), nil, &daemon.Options{MaxParallel: 4})
	cron := "0 1 * * *"
	r.write("a.yaml", studyDoc("a", "/bin/tfs", 8500, 8501, cron, "UTC", filepath.Join(r.out, "a")))
	r.write("b.yaml", studyDoc("b", "/bin/tfs", 8500, 8501, cron, "UTC", filepath.Join(r.out, "b")))
	// c shares only a port with a and b: the same server slot.
	r.write("c.yaml", studyDoc("c", "/bin/other", 9500, 8501, cron, "UTC", filepath.Join(r.out, "c")))
	r.write("d.yaml", studyDoc("d", "/bin/other", 9600, 9601, cron, "UTC", filepath.Join(r.out, "d")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T01:00:00Z"))
	first, second := r.runner.next(t), r.runner.next(t)
	got := []string{first.Study.Name, second.Study.Name}
	if diff := cmp.Diff([]string{"a", "d"}, got, sortStrings); diff != "" {
		t.Errorf("started together (-want +got):\n%s", diff)
	}
	r.runner.none(t, "b and c wait for a's server")
	if s := r.state("b"); s != daemon.StateQueued {
		t.Errorf("b: %s, want queued", s)
	}
	for _, run := range []*fakeRun{first, second} {
		if run.Study.Name == "a" {
			run.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
		}
	}
	third := r.runner.next(t)
	if third.Study.Name != "b" {
		t.Errorf("after a: %s started, want b (queue order)", third.Study.Name)
	}
	r.runner.none(t, "c still waits for b")
	third.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	fourth := r.runner.next(t)
	if fourth.Study.Name != "c" {
		t.Errorf("after b: %s, want c", fourth.Study.Name)
	}
	fourth.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	for _, run := range []*fakeRun{first, second} {
		if run.Study.Name == "d" {
			run.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
		}
	}
	r.waitFor("all idle", func() bool { return r.state("c") == daemon.StateIdle && r.state("d") == daemon.StateIdle })
	r.runner.mu.Lock()
	defer r.runner.mu.Unlock()
	for target, n := range r.runner.maxActive {
		if n > 1 {
			t.Errorf("target %s ran %d runs at once", target, n)
		}
	}
}

var sortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

// TestMaxParallelDefaultsToOne: runs on different targets still run one at
// a time by default.
func TestMaxParallelDefaultsToOne(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:00Z"), nil, nil)
	r.write("a.yaml", studyDoc("a", "/bin/a", 0, 0, "0 1 * * *", "UTC", filepath.Join(r.out, "a")))
	r.write("b.yaml", studyDoc("b", "/bin/b", 0, 0, "0 1 * * *", "UTC", filepath.Join(r.out, "b")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T01:00:00Z"))
	a := r.runner.next(t)
	r.runner.none(t, "one run at a time")
	a.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.runner.next(t).finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	if r.runner.maxTotal != 1 {
		t.Errorf("%d runs at once, want 1", r.runner.maxTotal)
	}
}

// TestDueWhileBusyIsQueuedOnce: a study that comes due while it runs is
// queued once, however many times it comes due meanwhile.
func TestDueWhileBusyIsQueuedOnce(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "* * * * *", "UTC", filepath.Join(r.out, "s")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T00:01:00Z"))
	first := r.runner.next(t)
	for _, ts := range []string{"2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z", "2026-01-01T00:04:00Z"} {
		r.clock.Set(at(t, ts))
		r.waitFor("the study queued", func() bool { return r.status("s").Queued != nil })
		r.waitFor("next moved past "+ts, func() bool { return r.status("s").Schedule.Next.After(at(t, ts)) })
	}
	st, err := r.d.Studies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Queue) != 1 {
		t.Errorf("queue holds %d runs, want 1: %+v", len(st.Queue), st.Queue)
	}
	first.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.runner.next(t).finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.runner.none(t, "nothing more was queued")
}

// TestResumesUnfinishedRunsFirst: at startup the daemon resumes the run a
// stop left unfinished, with its budget, before anything scheduled.
func TestResumesUnfinishedRunsFirst(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:00Z"), nil, nil)
	r.write("a.yaml", studyDoc("a", "/bin/a", 0, 0, "0 0 * * *", "UTC", filepath.Join(r.out, "a")))
	r.write("z.yaml", studyDoc("z", "/bin/z", 0, 0, "0 0 * * *", "UTC", filepath.Join(r.out, "z")))
	r.write("old.yaml", studyDoc("old", "/bin/o", 0, 0, "", "UTC", filepath.Join(r.out, "o")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// z was interrupted mid-run with the spec it has now.
	specHash := func(name string) string {
		t.Helper()
		s, err := configs.LoadStudy(filepath.Join(r.dir, name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return s.Hash()
	}
	for _, name := range []string{"z", "old"} {
		if err := r.db.PutStudy(ctx, &store.Study{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	zRun := &store.Run{Study: "z", Kind: store.KindScheduled, State: store.RunInterrupted, SpecHash: specHash("z"), Started: time.Now(), Budget: 7}
	oldRun := &store.Run{Study: "old", Kind: store.KindOneShot, State: store.RunRunning, SpecHash: "sha256:another-spec", Started: time.Now(), Budget: 9}
	for _, run := range []*store.Run{zRun, oldRun} {
		if err := r.db.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	r.start()
	run := r.runner.next(t)
	if run.Study.Name != "z" {
		t.Fatalf("first run: %s, want z's resume", run.Study.Name)
	}
	if diff := cmp.Diff(tuner.RunOptions{Kind: store.KindScheduled, Budget: 7, WarmStart: true}, run.Opts, cmpRunOptions); diff != "" {
		t.Errorf("resume options (-want +got):\n%s", diff)
	}
	if run.run.ID != zRun.ID {
		t.Errorf("the fake resumed run %d, want %d", run.run.ID, zRun.ID)
	}
	if p := r.status("z").Current; p == nil || p.Reason != daemon.ReasonResume || p.Run != zRun.ID {
		t.Errorf("z's progress %+v, want reason resume, run %d", p, zRun.ID)
	}
	run.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	// The run of an older spec is left for the tuner to close; nothing
	// else was due.
	r.runner.none(t, "old's unfinished run has another spec")
}

// TestGracefulStop: closing drain lets the trial in progress finish, leaves
// the run resumable, drops the queue and ends Run.
func TestGracefulStop(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "* * * * *", "UTC", filepath.Join(r.out, "s")))
	r.write("t.yaml", studyDoc("t", "/bin/a", 0, 0, "* * * * *", "UTC", filepath.Join(r.out, "t")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T00:01:00Z"))
	run := r.runner.next(t)
	r.waitFor("t queued", func() bool { return r.state("t") == daemon.StateQueued })
	r.stop(false)
	if run.Opts.Drain == nil {
		t.Fatal("the run got no drain channel")
	}
	select {
	case <-run.Opts.Drain:
	default:
		t.Error("the run's drain channel is open after the stop")
	}
	if run.ctxErr != nil {
		t.Errorf("a graceful stop cancelled the run's context (%v); it must only drain", run.ctxErr)
	}
	got, err := r.db.Run(context.Background(), "s", run.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.RunInterrupted {
		t.Errorf("run state %s, want interrupted (resumable)", got.State)
	}
	trials, _ := r.db.Trials(context.Background(), "s", run.run.ID)
	if len(trials) != 1 || trials[0].State != store.TrialSucceeded {
		t.Errorf("trials %+v, want the one in progress finished", trials)
	}
	if ok, why := r.d.Ready(); ok || why != "stopped" {
		t.Errorf("Ready after Run returned: %v %q", ok, why)
	}
	if _, err := r.d.Trigger("s", daemon.TriggerOptions{}); !errors.Is(err, daemon.ErrDraining) {
		t.Errorf("trigger after the stop: %v, want ErrDraining", err)
	}
	r.runner.none(t, "t was dropped with the queue")
	if !strings.Contains(r.logs.String(), "queued run dropped by the stop") {
		t.Error("the dropped queued run was not logged")
	}
}

// TestAbortStop: cancelling Run's context aborts the trial in progress.
func TestAbortStop(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "* * * * *", "UTC", filepath.Join(r.out, "s")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T00:01:00Z"))
	run := r.runner.next(t)
	r.stop(true)
	if run.ctxErr == nil {
		t.Error("the run's context was alive when it ended after the abort")
	}
	trials, _ := r.db.Trials(context.Background(), "s", run.run.ID)
	if len(trials) != 1 || trials[0].State != store.TrialInterrupted {
		t.Errorf("trials %+v, want the one in progress interrupted", trials)
	}
}

// TestReload: studies added, changed, removed, and a file that broke keeps
// its study's previous version.
func TestReload(t *testing.T) {
	start := at(t, "2026-01-01T00:00:30Z")
	r := newRig(t, start, nil, nil)
	doc := func(name, cron string) string {
		return studyDoc(name, "/bin/"+name, 0, 0, cron, "UTC", filepath.Join(r.out, name))
	}
	r.write("keep.yaml", doc("keep", "0 5 * * *"))
	r.write("gone.yaml", doc("gone", "0 5 * * *"))
	r.write("breaks.yaml", doc("breaks", "0 5 * * *"))
	r.write("moves.yaml", doc("moves", "0 5 * * *"))
	res, err := r.d.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"breaks", "gone", "keep", "moves"}, res.Added); diff != "" {
		t.Errorf("first load added (-want +got):\n%s", diff)
	}
	if err := os.Remove(filepath.Join(r.dir, "gone.yaml")); err != nil {
		t.Fatal(err)
	}
	r.write("breaks.yaml", "name: breaks\nslo: {latency: fast}\n")
	r.write("moves.yaml", doc("moves", "0 6 * * *"))
	r.write("new.yaml", doc("new", "0 7 * * *"))
	res, err = r.d.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := daemon.ReloadResult{Added: []string{"new"}, Updated: []string{"moves"}, Removed: []string{"gone"}}
	if diff := cmp.Diff(want, res, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Problems" }, cmp.Ignore())); diff != "" {
		t.Errorf("reload (-want +got):\n%s", diff)
	}
	if len(res.Problems) != 1 || res.Problems[0].Kept != "breaks" || !strings.Contains(res.Problems[0].Error, "slo.latency") {
		t.Errorf("problems %+v, want breaks.yaml's, its study kept", res.Problems)
	}
	st, err := r.d.Studies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range st.Studies {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"breaks", "keep", "moves", "new"}, names); diff != "" {
		t.Errorf("studies after the reload (-want +got):\n%s", diff)
	}
	if got := r.status("moves").Schedule.Next; !got.Equal(at(t, "2026-01-01T06:00:00Z")) {
		t.Errorf("moves' next run %s, want its new time 06:00", got)
	}
	if _, err := r.d.Study(context.Background(), "gone"); !errors.Is(err, daemon.ErrUnknownStudy) {
		t.Errorf("gone: %v, want ErrUnknownStudy", err)
	}

	// An unreadable directory changes nothing.
	if err := os.RemoveAll(r.dir); err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Reload(context.Background()); !errors.Is(err, daemon.ErrStudiesDir) {
		t.Errorf("reload of a missing directory: %v, want ErrStudiesDir", err)
	}
	if _, err := r.d.Study(context.Background(), "keep"); err != nil {
		t.Errorf("keep after a failed reload: %v", err)
	}
}

// TestReloadRemovesRunningStudyAfterItsRun: a study whose file goes while
// it runs finishes its run, then is dropped.
func TestReloadRemovesRunningStudyAfterItsRun(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "* * * * *", "UTC", filepath.Join(r.out, "s")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T00:01:00Z"))
	run := r.runner.next(t)
	os.Remove(filepath.Join(r.dir, "s.yaml"))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := r.status("s"); !s.Removed || s.State != daemon.StateRunning {
		t.Errorf("during its run: removed %v state %s, want removed and running", s.Removed, s.State)
	}
	run.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.waitFor("s dropped", func() bool {
		_, err := r.d.Study(context.Background(), "s")
		return errors.Is(err, daemon.ErrUnknownStudy)
	})
}

// TestRolloutAfterAcceptedChange: an accepted recommendation runs the
// study's rollout command with the export path; a kept incumbent does not.
func TestRolloutAfterAcceptedChange(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	export := filepath.Join(r.out, "batching.config")
	log := filepath.Join(r.out, "rollout.log")
	bin := filepath.Join(r.out, "rollout.sh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$BATCHTUNE_STUDY $BATCHTUNE_RECOMMENDATION $1\" >> "+log+"\ncp \"$1\" "+r.out+"/deployed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "* * * * *", "UTC", export, bin))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T00:01:00Z"))
	// A first run: its recommendation is accepted.
	r.runner.next(t).finishWith(ending{outcome: store.OutcomeRecommended, objective: 100, accepted: true,
		decision: &tuner.Decision{Accepted: true, Message: "first recommendation"}})
	r.waitFor("the first rollout", func() bool { return r.status("s").LastRollout != nil })
	ro := r.status("s").LastRollout
	if ro.Result != daemon.RolloutOK || ro.Recommendation != 1 {
		t.Errorf("rollout %+v, want ok for recommendation 1", ro)
	}
	data, _ := os.ReadFile(log)
	if got, want := string(data), "s 1 "+export+"\n"; got != want {
		t.Errorf("rollout log %q, want %q", got, want)
	}
	if deployed, _ := os.ReadFile(filepath.Join(r.out, "deployed")); string(deployed) != "max_batch_size { value: 16 }\n" {
		t.Errorf("deployed %q: the rollout did not get the exported file", deployed)
	}
	recs, err := r.db.Recommendations(context.Background(), "s")
	if err != nil || len(recs) != 1 || !strings.Contains(recs[0].Note, "rollout ok (exit 0") {
		t.Errorf("recommendation history %+v (%v), want the rollout noted", recs, err)
	}

	// A kept incumbent rolls nothing out.
	r.clock.Set(at(t, "2026-01-01T00:02:00Z"))
	r.runner.next(t).finishWith(ending{outcome: store.OutcomeKept, objective: 99,
		decision: &tuner.Decision{Kept: true, Incumbent: &recs[0], Message: "incumbent kept"}})
	r.waitFor("the second run's end", func() bool { return r.status("s").LastOutcome == string(store.OutcomeKept) })
	data, _ = os.ReadFile(log)
	if strings.Count(string(data), "\n") != 1 {
		t.Errorf("rollout log %q: a kept incumbent was rolled out", data)
	}
}

// TestDegradationIsLoud: a degraded incumbent shows in the status and is
// logged at warn.
func TestDegradationIsLoud(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "* * * * *", "UTC", filepath.Join(r.out, "s")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T00:01:00Z"))
	inc := &store.Recommendation{Study: "s", Seq: 1, Objective: 100, Accepted: true}
	r.runner.next(t).finishWith(ending{outcome: store.OutcomeKept, objective: 70,
		decision: &tuner.Decision{Kept: true, Incumbent: inc, Degraded: true, Degradation: 0.3, Message: "incumbent kept; incumbent 70 req/s now (was 100, -30%)"}})
	r.waitFor("the run's end", func() bool { return r.status("s").LastOutcome != "" })
	s := r.status("s")
	if !s.Degraded || s.Degradation != 0.3 || s.LastDecision == nil {
		t.Errorf("status degraded %v degradation %v decision %+v, want true, 0.3, the decision", s.Degraded, s.Degradation, s.LastDecision)
	}
	if !strings.Contains(r.logs.String(), "level=WARN msg=\"INCUMBENT DEGRADED\" study=s") {
		t.Errorf("no warning logged:\n%s", r.logs.String())
	}

	// The alarm outlives the daemon: a new one on the same store shows it
	// in its status and its metrics before it runs anything.
	r.stop(false)
	d2, err := daemon.New(r.db, r.dir, &daemon.Options{Clock: r.clock, Runner: r.runner, Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2, err := d2.Study(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Degraded || s2.Degradation != 0.3 {
		t.Errorf("after a restart: status degraded %v degradation %v, want true, 0.3", s2.Degraded, s2.Degradation)
	}
	srv := httptest.NewServer(d2.Handler(daemon.APIOptions{}))
	defer srv.Close()
	fams := scrape(t, srv.URL)
	for name, want := range map[string]float64{"batchtune_incumbent_degraded": 1, "batchtune_incumbent_degradation_ratio": 0.3} {
		if v, ok := metricValue(fams, name, map[string]string{"study": "s"}); !ok || v != want {
			t.Errorf("after a restart: %s{study=\"s\"} = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// TestCancel: the run in progress, a queued run, and a run left
// unfinished in the store.
func TestCancel(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "", "UTC", filepath.Join(r.out, "s")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r.start()
	if _, err := r.d.Cancel(ctx, "s", 0); !errors.Is(err, daemon.ErrNothingToCancel) {
		t.Errorf("cancel of an idle study: %v, want ErrNothingToCancel", err)
	}
	if _, err := r.d.Trigger("s", daemon.TriggerOptions{Budget: 4}); err != nil {
		t.Fatal(err)
	}
	run := r.runner.next(t)
	if run.Opts.Budget != 4 || !run.Opts.WarmStart || run.Opts.Kind != store.KindAPI {
		t.Errorf("triggered run options %+v, want budget 4, warm, api", run.Opts)
	}
	if _, err := r.d.Trigger("s", daemon.TriggerOptions{}); err != nil {
		t.Fatalf("queue behind the running one: %v", err)
	}
	if _, err := r.d.Trigger("s", daemon.TriggerOptions{}); !errors.Is(err, daemon.ErrAlreadyQueued) {
		t.Errorf("a second queued trigger: %v, want ErrAlreadyQueued", err)
	}
	// The queued one first ("current" prefers the running one, so cancel
	// the running one by ID and the queued one by "current" afterwards).
	res, err := r.d.Cancel(ctx, "s", run.run.ID)
	if err != nil || res.What != daemon.StateRunning || res.Run != run.run.ID {
		t.Fatalf("cancel of the running run: %+v, %v", res, err)
	}
	r.waitFor("the run cancelled", func() bool { return r.status("s").LastOutcome == daemon.OutcomeCancelled })
	got, _ := r.db.Run(ctx, "s", run.run.ID)
	if got.State != store.RunCancelled || got.Outcome != store.OutcomeCancelled || !strings.Contains(got.Detail, "cancelled") {
		t.Errorf("cancelled run in the store: %s/%s %q, want cancelled (not resumable)", got.State, got.Outcome, got.Detail)
	}
	// The queued trigger started once the target was free.
	next := r.runner.next(t)
	res, err = r.d.Cancel(ctx, "s", 0)
	if err != nil || res.What != daemon.StateRunning {
		t.Fatalf("cancel current: %+v, %v", res, err)
	}
	r.waitFor("idle", func() bool { return r.state("s") == daemon.StateIdle })
	if next.ctxErr == nil {
		t.Error("the second run's context was alive when it ended after its cancel")
	}

	// A run a crash left unfinished, not running here.
	stale := &store.Run{Study: "s", Kind: store.KindOneShot, State: store.RunRunning, SpecHash: "x", Started: time.Now()}
	if err := r.db.CreateRun(ctx, stale); err != nil {
		t.Fatal(err)
	}
	res, err = r.d.Cancel(ctx, "s", stale.ID)
	if err != nil || res.What != "unfinished" {
		t.Fatalf("cancel of an unfinished run: %+v, %v", res, err)
	}
	if got, _ := r.db.Run(ctx, "s", stale.ID); got.State != store.RunCancelled {
		t.Errorf("stale run %s, want cancelled", got.State)
	}
	if _, err := r.d.Cancel(ctx, "s", stale.ID); !errors.Is(err, daemon.ErrNothingToCancel) {
		t.Errorf("cancel of a finished run: %v, want ErrNothingToCancel", err)
	}
	if _, err := r.d.Cancel(ctx, "s", 999); !errors.Is(err, daemon.ErrRunNotFound) {
		t.Errorf("cancel of a missing run: %v, want ErrRunNotFound", err)
	}
	if _, err := r.d.Cancel(ctx, "nope", 0); !errors.Is(err, daemon.ErrUnknownStudy) {
		t.Errorf("cancel in an unknown study: %v, want ErrUnknownStudy", err)
	}

	// A queued run that has not started.
	r2 := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r2.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "", "UTC", filepath.Join(r2.out, "s")))
	if _, err := r2.d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.d.Trigger("s", daemon.TriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = r2.d.Cancel(ctx, "s", 0)
	if err != nil || res.What != daemon.StateQueued {
		t.Fatalf("cancel of a queued run: %+v, %v", res, err)
	}
	r2.start()
	r2.runner.none(t, "the cancelled queued run")
}
