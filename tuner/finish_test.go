package tuner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// TestFailedExportDoesNotSetTheIncumbent: issue 15's vanished export
// folder. The export folder is removed while the run measures; the run
// ends failed, its recommendation is kept but not accepted, and the
// incumbent stays what the last exported run set.
func TestFailedExportDoesNotSetTheIncumbent(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "export")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := testStudy(t, "export: {path: "+filepath.Join(dir, "batching.config")+"}\n")
	db := storetest.Open(t)
	rt := &fakeRuntime{}
	p := &fakeProber{rt: rt, surface: testSurface}

	// Run 1 exports: its recommendation is the incumbent.
	first, err := newTestTuner(t, s, db, rt, p, nil).Run(ctx, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Run.State != store.RunFinished || first.Run.Outcome != store.OutcomeRecommended || len(first.Run.Exported) != 1 {
		t.Fatalf("run 1: %s/%s exported %v", first.Run.State, first.Run.Outcome, first.Run.Exported)
	}

	// Run 2: the folder goes away mid-run.
	p.hook = func(ctx context.Context, n int) error {
		if n > 3 {
			os.RemoveAll(dir)
		}
		return nil
	}
	rep, err := newTestTuner(t, s, db, rt, p, nil).Run(ctx, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "export:") || !strings.Contains(err.Error(), "batchtune export --study fake --run 2 -o FILE") {
		t.Fatalf("run 2: error %v, want the export's failure and how to recover", err)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the export folder was not removed (%v): the test tests nothing", serr)
	}
	stored, err := db.Run(ctx, "fake", rep.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != store.RunFailed || stored.Outcome != store.OutcomeError || stored.Recommendation == 0 || len(stored.Exported) != 0 {
		t.Errorf("run 2 stored as %s/%s, recommendation %d, exported %v; want failed/error with its recommendation and no export",
			stored.State, stored.Outcome, stored.Recommendation, stored.Exported)
	}
	inc, err := db.Incumbent(ctx, "fake")
	if err != nil || inc.Run != first.Run.ID {
		t.Fatalf("incumbent after the failed export: %+v, %v; want run %d's", inc, err, first.Run.ID)
	}
	recs, err := db.Recommendations(ctx, "fake")
	if err != nil || len(recs) != 2 {
		t.Fatalf("recommendations: %+v, %v; want 2", recs, err)
	}
	if r := recs[1]; r.Run != rep.Run.ID || r.Accepted || !strings.Contains(r.Note, "not accepted") {
		t.Errorf("run 2's recommendation %+v: want kept, not accepted, and saying so", r)
	}
}

// TestFinishRunRefusesAnIncumbentFromAFailedRun: the store's own rule.
func TestFinishRunRefusesAnIncumbentFromAFailedRun(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	if err := db.PutStudy(ctx, &store.Study{Name: "s", SpecHash: "h"}); err != nil {
		t.Fatal(err)
	}
	run := &store.Run{Study: "s", Kind: store.KindOneShot, SpecHash: "h"}
	if err := db.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	run.State, run.Outcome = store.RunFailed, store.OutcomeError
	rec := &store.Recommendation{Study: "s", Run: run.ID, Accepted: true}
	if err := db.FinishRun(ctx, run, rec); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("FinishRun(failed, accepted): %v, want ErrInvalid", err)
	}
	if _, err := db.Incumbent(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("incumbent: %v, want none", err)
	}
	run.State, run.Outcome = store.RunFinished, store.OutcomeRecommended
	if err := db.FinishRun(ctx, run, rec); err != nil || rec.Seq != 1 || run.Recommendation != 1 {
		t.Fatalf("FinishRun(finished, accepted): %v, seq %d, run.Recommendation %d", err, rec.Seq, run.Recommendation)
	}
	if inc, err := db.Incumbent(ctx, "s"); err != nil || inc.Run != run.ID {
		t.Errorf("incumbent: %+v, %v", inc, err)
	}
}

// TestStoredSpecIsCapped: a study file over MaxStoredSpec is kept cut,
// with a note; one under it whole.
func TestStoredSpecIsCapped(t *testing.T) {
	small := []byte("name: s\n")
	if got := storedSpec(small); got != string(small) {
		t.Errorf("small spec stored as %q", got)
	}
	big := []byte(strings.Repeat("# padding\n", MaxStoredSpec/5))
	got := storedSpec(big)
	if len(got) > MaxStoredSpec+200 || !strings.Contains(got, "cut by batchtune") {
		t.Errorf("a %d-byte spec stored as %d bytes, want at most ~%d with a note", len(big), len(got), MaxStoredSpec)
	}
}
