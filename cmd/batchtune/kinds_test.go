package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/store"
)

// TestRunsAndStatusShowWhatStartedARun: runs lists each run's kind as
// stored (a one-shot tune, a nightly run, a run queued through the API),
// and status shows the latest run's.
func TestRunsAndStatusShowWhatStartedARun(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "batchtune.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "s", SpecHash: "h"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.RunKind{store.KindOneShot, store.KindScheduled, store.KindAPI} {
		r := &store.Run{Study: "s", Kind: k, SpecHash: "h", Started: time.Now().UTC()}
		if err := db.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.State, r.Outcome, r.Ended = store.RunFinished, store.OutcomeKept, time.Now().UTC()
		if err := db.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	app := &cli.App{Name: "batchtune", Commands: []*cli.Command{runsCommand()}, Writer: &out, ErrWriter: &out}
	if err := app.RunContext(ctx, []string{"batchtune", "runs", "--db", path}); err != nil {
		t.Fatal(err)
	}
	for i, kind := range []string{"oneshot", "scheduled", "api"} {
		if !regexp.MustCompile(`(?m)^` + string(rune('1'+i)) + `\s+` + kind + `\s+finished`).MatchString(out.String()) {
			t.Errorf("runs does not list run %d as %s:\n%s", i+1, kind, out.String())
		}
	}

	rep, err := statusFromStore(ctx, path, "s")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	printStatus(&out, rep, time.Now())
	if !regexp.MustCompile(`(?m)^s\s+.*\b3 api finished\b`).MatchString(out.String()) {
		t.Errorf("status does not show the latest run as run 3 by the API:\n%s", out.String())
	}
}
