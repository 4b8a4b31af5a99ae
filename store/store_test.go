package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

var ctx = context.Background()

// newRun stores a study and starts a run of it.
func newRun(t *testing.T, db *store.DB, study string) *store.Run {
	t.Helper()
	if err := db.PutStudy(ctx, &store.Study{Name: study, SpecHash: "sha256:aa", Spec: "name: " + study + "\n"}); err != nil {
		t.Fatal(err)
	}
	r := &store.Run{Study: study, Kind: store.KindOneShot, Budget: 10}
	if err := db.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func addTrial(t *testing.T, db *store.DB, r *store.Run, state store.TrialState, mbs int64) *store.Trial {
	t.Helper()
	tr := &store.Trial{Study: r.Study, Run: r.ID, Role: store.RoleSearch, State: state,
		Config: []store.Param{{Name: "max_batch_size", Value: mbs}, {Name: "batch_timeout_micros", Value: 1000}}}
	if err := db.AddTrial(ctx, tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestOrdering adds more than 256 trials and runs: with 8-byte big-endian
// keys, listing order is creation order (little-endian or decimal keys
// would put 256 before 2).
func TestOrdering(t *testing.T) {
	db := storetest.Open(t)
	r := newRun(t, db, "s")
	const n = 300
	for i := 1; i <= n; i++ {
		addTrial(t, db, r, store.TrialSucceeded, int64(i))
	}
	trials, err := db.Trials(ctx, "s", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != n {
		t.Fatalf("got %d trials, want %d", len(trials), n)
	}
	for i, tr := range trials {
		if tr.Seq != uint64(i+1) || tr.Config[0].Value != int64(i+1) {
			t.Fatalf("trial %d: seq %d, max_batch_size %d; want %d, %d", i, tr.Seq, tr.Config[0].Value, i+1, i+1)
		}
	}
}

// TestRunAndRecommendationOrder numbers runs and recommendations in
// creation order and finds the incumbent.
func TestRunAndRecommendationOrder(t *testing.T) {
	db := storetest.Open(t)
	newRun(t, db, "s")
	for i := 2; i <= 3; i++ {
		if err := db.CreateRun(ctx, &store.Run{Study: "s", Kind: store.KindScheduled}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := db.Runs(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]uint64{1, 2, 3}, ids); diff != "" {
		t.Errorf("run ids (-want +got):\n%s", diff)
	}
	for i := 1; i <= 3; i++ {
		rec := &store.Recommendation{Study: "s", Run: uint64(i), Batching: fmt.Sprintf("max_batch_size { value: %d }\n", i), Accepted: i != 3}
		if err := db.AddRecommendation(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if rec.Seq != uint64(i) {
			t.Errorf("recommendation %d got seq %d", i, rec.Seq)
		}
	}
	// The incumbent is the latest accepted one, not the latest.
	inc, err := db.Incumbent(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if inc.Seq != 2 {
		t.Errorf("incumbent is recommendation %d, want 2", inc.Seq)
	}
	recs, err := db.Recommendations(ctx, "s")
	if err != nil || len(recs) != 3 || recs[2].Accepted {
		t.Fatalf("history: %v, %+v", err, recs)
	}
	// Accepting the third makes it the incumbent.
	recs[2].Accepted = true
	if err := db.PutRecommendation(ctx, &recs[2]); err != nil {
		t.Fatal(err)
	}
	if inc, err := db.Incumbent(ctx, "s"); err != nil || inc.Seq != 3 {
		t.Errorf("incumbent after accepting 3: %v, %v", inc, err)
	}
}

// TestTrialLifecycle writes a trial at each state change and reads it back
// from a fresh handle, as a crash-and-restart would.
func TestTrialLifecycle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(t, db, "s")
	tr := addTrial(t, db, r, store.TrialSuggested, 8)
	if tr.Seq != 1 || len(tr.Phases) != 1 || tr.Phases[0].State != store.TrialSuggested {
		t.Fatalf("added trial: %+v", tr)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, s := range []store.TrialState{store.TrialStarting, store.TrialWarming, store.TrialMeasuring, store.TrialSucceeded} {
		tr.Transition(s, t0.Add(time.Duration(i)*time.Second))
		if s == store.TrialSucceeded {
			obj := 812.5
			tr.Objective = &obj
			tr.Feasible = true
			tr.Summary = store.Summary{Throughput: 812.5, P99: 41 * time.Millisecond, MeanBatch: 7.5}
			tr.Measurement = json.RawMessage(`{"windows":[{"qps":810},{"qps":815}],"codes":{"OK":16250}}`)
		}
		if err := db.PutTrial(ctx, tr); err != nil {
			t.Fatalf("put %s: %v", s, err)
		}
	}
	// Listings leave the measurement out; a put without one keeps it.
	listed, err := db.Trials(ctx, "s", r.ID)
	if err != nil || len(listed) != 1 || listed[0].Measurement != nil || listed[0].Summary.P99 != 41*time.Millisecond {
		t.Errorf("listing: %v, %+v", err, listed)
	}
	noMeas := *tr
	noMeas.Measurement = nil
	noMeas.Reason = "annotated"
	if err := db.PutTrial(ctx, &noMeas); err != nil {
		t.Fatal(err)
	}
	tr.Reason = "annotated"
	// A finished trial keeps its state.
	bad := *tr
	bad.State = store.TrialFailed
	if err := db.PutTrial(ctx, &bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("rewriting a succeeded trial as failed: got %v, want ErrInvalid", err)
	}
	// An unknown state is refused.
	bad.State = "exploded"
	if err := db.PutTrial(ctx, &bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown state: got %v, want ErrInvalid", err)
	}
	// A trial that was never added cannot be put.
	ghost := *tr
	ghost.Seq = 99
	if err := db.PutTrial(ctx, &ghost); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("put of a trial never added: got %v, want ErrNotFound", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	got, err := db2.Trial(ctx, "s", r.ID, tr.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tr, got); diff != "" {
		t.Errorf("trial after reopen (-want +got):\n%s", diff)
	}
	var states []store.TrialState
	for _, p := range got.Phases {
		states = append(states, p.State)
	}
	want := []store.TrialState{store.TrialSuggested, store.TrialStarting, store.TrialWarming, store.TrialMeasuring, store.TrialSucceeded}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if err := storetest.Check(path); err != nil {
		t.Error(err)
	}
}

// TestResume leaves a run as a crashed process would (trials in unfinished
// states, the run still running) and resumes it.
func TestResume(t *testing.T) {
	db := storetest.Open(t)
	r := newRun(t, db, "s")
	states := []store.TrialState{store.TrialSucceeded, store.TrialRejected, store.TrialFailed, store.TrialMeasuring, store.TrialSuggested}
	for i, s := range states {
		addTrial(t, db, r, s, int64(1<<i))
	}
	if got, err := db.LatestUnfinishedRun(ctx, "s"); err != nil || got.ID != r.ID {
		t.Fatalf("LatestUnfinishedRun = %v, %v; want run %d", got, err, r.ID)
	}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	run, trials, err := db.ResumeRun(ctx, "s", "batchtune stopped mid-trial", now)
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != r.ID || run.State != store.RunRunning {
		t.Errorf("resumed run %d in state %s, want %d running", run.ID, run.State, r.ID)
	}
	var got []string
	for _, tr := range trials {
		got = append(got, fmt.Sprintf("%d %s", tr.Seq, tr.State))
	}
	// Finished trials are kept as they were; unfinished ones are interrupted
	// (and will be redone); order is trial order.
	want := []string{"1 succeeded", "2 rejected", "3 failed", "4 interrupted", "5 interrupted"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	last := trials[3].Phases[len(trials[3].Phases)-1]
	if last.State != store.TrialInterrupted || !last.At.Equal(now) || trials[3].Reason != "batchtune stopped mid-trial" {
		t.Errorf("interrupted trial: last phase %+v, reason %q", last, trials[3].Reason)
	}
	// The marks are stored, not only returned.
	stored, err := db.Trials(ctx, "s", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(trials, stored); diff != "" {
		t.Errorf("stored trials differ from returned (-returned +stored):\n%s", diff)
	}

	// A finished run is not resumed, and neither is an unfinished one that
	// a newer run followed.
	run.State, run.Ended, run.Outcome = store.RunFinished, now, store.OutcomeRecommended
	if err := db.PutRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.ResumeRun(ctx, "s", "x", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resume after finish: got %v, want ErrNotFound", err)
	}
	old := &store.Run{Study: "s", Kind: store.KindOneShot}
	if err := db.CreateRun(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateRun(ctx, &store.Run{Study: "s", Kind: store.KindOneShot, State: store.RunFailed, Outcome: store.OutcomeError}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LatestUnfinishedRun(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("abandoned run %d was offered for resume: %v", old.ID, err)
	}
	// A study that does not exist.
	if _, _, err := db.ResumeRun(ctx, "nope", "x", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resume of unknown study: got %v, want ErrNotFound", err)
	}
}

// TestStudyTrials lists the trials of every run, run by run.
func TestStudyTrials(t *testing.T) {
	db := storetest.Open(t)
	r1 := newRun(t, db, "s")
	addTrial(t, db, r1, store.TrialSucceeded, 1)
	addTrial(t, db, r1, store.TrialFailed, 2)
	r2 := &store.Run{Study: "s", Kind: store.KindScheduled}
	if err := db.CreateRun(ctx, r2); err != nil {
		t.Fatal(err)
	}
	addTrial(t, db, r2, store.TrialSucceeded, 3)
	all, err := db.StudyTrials(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range all {
		got = append(got, fmt.Sprintf("%d/%d=%d", tr.Run, tr.Seq, tr.Config[0].Value))
	}
	if diff := cmp.Diff([]string{"1/1=1", "1/2=2", "2/1=3"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestStudies keeps the first creation time across updates of the spec.
func TestStudies(t *testing.T) {
	db := storetest.Open(t)
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &store.Study{Name: "b", SpecHash: "sha256:1", Spec: "v1", Created: created}
	if err := db.PutStudy(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "a", SpecHash: "sha256:x"}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "b", SpecHash: "sha256:2", Spec: "v2"}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Study(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec != "v2" || got.SpecHash != "sha256:2" || !got.Created.Equal(created) {
		t.Errorf("study b: %+v", got)
	}
	all, err := db.Studies(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "a" || all[1].Name != "b" {
		t.Errorf("Studies = %+v, %v", all, err)
	}
	if _, err := db.Study(ctx, "zzz"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown study: got %v, want ErrNotFound", err)
	}
	if err := db.CreateRun(ctx, &store.Run{Study: "zzz", Kind: store.KindOneShot}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run of unknown study: got %v, want ErrNotFound", err)
	}
	if err := db.CreateRun(ctx, &store.Run{Study: "a", Kind: "nightly"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown run kind: got %v, want ErrInvalid", err)
	}
}

// TestReadOnlyAndClosed covers opening a missing store read-only, writing
// through a read-only DB and using a closed one.
func TestReadOnlyAndClosed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.db")
	if _, err := store.Open(path, &store.Options{ReadOnly: true}); !errors.Is(err, store.ErrNotExist) {
		t.Errorf("read-only open of a missing file: got %v, want ErrNotExist", err)
	}
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	newRun(t, db, "s")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Studies(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("use after close: got %v, want ErrClosed", err)
	}
	ro, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.PutStudy(ctx, &store.Study{Name: "x"}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("write through read-only: got %v, want ErrReadOnly", err)
	}
	if runs, err := ro.Runs(ctx, "s"); err != nil || len(runs) != 1 {
		t.Errorf("read-only Runs = %v, %v", runs, err)
	}
	// A cancelled context stops a call before it touches the file.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ro.Runs(cctx, "s"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v", err)
	}
}

// TestConcurrentUse writes from several goroutines through one DB while
// another DB on the same file reads: transactions are serialised within a
// handle and interleave with the other handle's through the file lock.
func TestConcurrentUse(t *testing.T) {
	db := storetest.Open(t)
	r := newRun(t, db, "s")
	ro, err := store.Open(db.Path(), &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	const writers, each = 4, 10
	errs := make(chan error, writers+1)
	done := make(chan struct{})
	for w := range writers {
		go func() {
			for i := range each {
				tr := &store.Trial{Study: "s", Run: r.ID, State: store.TrialSuggested, Config: []store.Param{{Name: "w", Value: int64(w*100 + i)}}}
				if err := db.AddTrial(ctx, tr); err != nil {
					errs <- err
					return
				}
				tr.Transition(store.TrialSucceeded, time.Now())
				if err := db.PutTrial(ctx, tr); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if _, err := ro.Trials(ctx, "s", r.ID); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Millisecond) // a busy reader, not a flood
		}
	}()
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	trials, err := ro.Trials(ctx, "s", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i, tr := range trials {
		if tr.Seq != uint64(i+1) || tr.State != store.TrialSucceeded || seen[tr.Config[0].Value] {
			t.Fatalf("trial %d: %+v", i, tr)
		}
		seen[tr.Config[0].Value] = true
	}
	if len(trials) != writers*each {
		t.Errorf("got %d trials, want %d", len(trials), writers*each)
	}
}
