package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/store"
)

// batchtune runs the test binary as batchtune with args (see TestMain)
// and returns its stdout, stderr and exit status.
func batchtune(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATCHTUNE_TEST_MAIN=1", "BATCHTUNE_TEST_ARGS="+strings.Join(args, " "))
	var out, errw strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errw
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errw.String(), code
}

// TestCLIConventions: issue 15's list of what a new user met.
func TestCLIConventions(t *testing.T) {
	// help and help COMMAND answer.
	if out, errw, code := batchtune(t, "help"); code != 0 || !strings.Contains(out, "COMMANDS:") {
		t.Errorf("help: exit %d, %q %q", code, out, errw)
	}
	if out, _, code := batchtune(t, "help", "tune"); code != 0 || !strings.Contains(out, "batchtune tune - ") {
		t.Errorf("help tune: exit %d, %q", code, out)
	}
	// An unknown command: a suggestion and a usage status.
	if _, errw, code := batchtune(t, "tunee"); code != exitUsage || !strings.Contains(errw, `Did you mean "tune"?`) {
		t.Errorf("tunee: exit %d, %q", code, errw)
	}
	// Defaults printed once.
	out, _, _ := batchtune(t, "trials", "--help")
	if !strings.Contains(out, "the run (default: the latest)") || strings.Contains(out, "(default: 0)") {
		t.Errorf("trials --help prints its defaults wrongly:\n%s", out)
	}

	// A store with a study and a run with no trials.
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "b.db")
	db, err := store.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "s", SpecHash: "h"}); err != nil {
		t.Fatal(err)
	}
	r := &store.Run{Study: "s", Kind: store.KindOneShot, SpecHash: "h", Budget: 7}
	if err := db.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, errw, code := batchtune(t, "trials", "--json", "--db", dbPath); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("trials --json with no trials: exit %d, %q %q, want []", code, out, errw)
	}
	// runs lists the study's runs.
	if out, errw, code := batchtune(t, "runs", "--db", dbPath); code != 0 || !strings.Contains(out, "oneshot") || !strings.Contains(out, "running") {
		t.Errorf("runs: exit %d, %q %q", code, out, errw)
	}

	// validate takes a directory, as daemon --studies does.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("name: a\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	if _, errw, code := batchtune(t, "validate", dir); code != exitError || !strings.Contains(errw, "a.yaml") || strings.Contains(errw, "notes.txt") {
		t.Errorf("validate DIR: exit %d, %q", code, errw)
	}
}
