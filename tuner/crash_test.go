package tuner_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// TestCrashResume kills `batchtune tune` with SIGKILL at a dozen random
// moments of one study, then lets it finish. After every kill: the store
// passes bbolt's consistency check, no finished trial is lost or changed,
// and no trial server outlives batchtune. At the end the study has
// recommended, and no configuration was finished twice except one that
// was interrupted and redone.
func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and reruns a study a dozen times; run without -short")
	}
	bin := binaries(t)
	dir := t.TempDir()
	model := emulatortest.Model(t, "ranker")
	study := filepath.Join(dir, "study.yaml")
	db := filepath.Join(dir, "batchtune.db")
	stateDir := filepath.Join(dir, "state")
	doc := fmt.Sprintf(`name: crash
target:
  runtime: process
  model: {name: ranker, base_path: %s}
  start_timeout: 20s
  process: {binary: %s/tfs-emulator}
load:
  mode: closed
  concurrency: 8
  connections: 1
  payload:
    batch: 1
    inputs: [{name: features, dtype: DT_FLOAT, shape: [-1, 256]}]
  warmup: {requests: 20, max_duration: 2s}
  min_duration: 1s
  max_duration: 2s
slo:
  latency: 2s
objective: max_throughput
space:
  max_batch_size: {values: [4, 8, 16, 32]}
  batch_timeout_micros: {values: [0, 2000]}
search: {strategy: random, trials: 6, seed: 3}
confirmation: {top_k: 1, repeats: 2}
export: {path: %s/batching.config}
`, model, bin, dir)
	if err := os.WriteFile(study, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	tune := func() *exec.Cmd {
		cmd := exec.Command(bin+"/batchtune", "tune", "--config", study, "--db", db, "--state-dir", stateDir)
		cmd.Env = append(os.Environ(), "BATCHTUNE_HOME="+dir)
		return cmd
	}

	finished := map[uint64]store.TrialState{} // seq → terminal state seen so far
	check := func(when string) []store.Trial {
		t.Helper()
		if _, err := os.Stat(db); os.IsNotExist(err) {
			return nil // killed before the store was created
		}
		if err := storetest.Check(db); err != nil {
			t.Fatalf("%s: store check: %v", when, err)
		}
		sdb, err := store.Open(db, &store.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer sdb.Close()
		trials, err := sdb.StudyTrials(context.Background(), "crash")
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("%s: %v", when, err)
		}
		now := map[uint64]store.Trial{}
		for _, tr := range trials {
			now[tr.Seq] = tr
		}
		for seq, st := range finished {
			if tr, ok := now[seq]; !ok || tr.State != st {
				t.Errorf("%s: finished trial %d (%s) is now %+v", when, seq, st, now[seq].State)
			}
		}
		for _, tr := range trials {
			if tr.State.Terminal() {
				finished[tr.Seq] = tr.State
			}
		}
		return trials
	}

	r := rand.New(rand.NewPCG(42, 7))
	kills := map[store.TrialState]int{}
	for i := 0; i < 12; i++ {
		cmd := tune()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+r.IntN(4700)) * time.Millisecond)
		// What was in flight when the kill came, as the store said it.
		if trials := check(fmt.Sprintf("before kill %d", i)); len(trials) > 0 {
			kills[trials[len(trials)-1].State]++
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		check(fmt.Sprintf("after kill %d", i))
		if pids := gone(stateDir, 3*time.Second); len(pids) > 0 {
			t.Errorf("kill %d: trial servers %v outlived batchtune", i, pids)
		}
	}
	t.Logf("kills by the state of the latest trial: %v", kills)
	mid := kills[store.TrialStarting] + kills[store.TrialWarming] + kills[store.TrialMeasuring]
	if mid == 0 {
		t.Errorf("no kill landed mid-trial (%v): the test did not test what it claims", kills)
	}

	cmd := tune()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	trials := check("final")
	if !bytes.Contains(out, []byte("recommended:")) {
		t.Errorf("final run made no recommendation:\n%s", out)
	}
	// No configuration finished twice in the search, except after an
	// interruption (the redo).
	count := map[string]int{}
	interrupted := map[string]bool{}
	for _, tr := range trials {
		key := fmt.Sprint(tr.Run, tr.Config)
		switch {
		case tr.Role != store.RoleSearch:
		case tr.State == store.TrialInterrupted:
			interrupted[key] = true
		case tr.State.Terminal():
			count[key]++
		}
	}
	for k, n := range count {
		if n > 1 {
			t.Errorf("search configuration %s finished %d times", k, n)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "batching.config")); err != nil {
		t.Errorf("no export: %v", err)
	}
	if pids := gone(stateDir, 3*time.Second); len(pids) > 0 {
		t.Errorf("trial servers %v left after the study ended", pids)
	}
}

// gone waits up to wait for the processes whose command line names
// stateDir (trial servers of that study) to end, and returns those left.
func gone(stateDir string, wait time.Duration) []int {
	deadline := time.Now().Add(wait)
	for {
		pids := emulatortest.ProcessesMentioning(stateDir)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
}
