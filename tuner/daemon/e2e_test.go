package daemon_test

// End-to-end tests: the daemon against the TF Serving stand-in
// (tfs-emulator built from this tree) through the real tuner, runtime,
// probe and store, on a compressed schedule. They take a minute or two
// each and are skipped by go test -short.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/daemon"
	_ "github.com/batchtune/batchtune/tuner/runtime/process" // registers target.runtime process
)

func TestMain(m *testing.M) { emulatortest.Main(m) }

// binaries builds tfs-emulator and batchtune from this tree once per test
// binary and returns the directory holding them.
func binaries(t *testing.T) string {
	t.Helper()
	return emulatortest.Binaries(t, "tfs-emulator", "batchtune")
}

// standInModel copies the stand-in's ranker model into dir/model with
// cost parameters of the test's choosing, and returns its base path.
// Device times of tens of milliseconds keep the figures clear of this
// machine's CPU noise; no cold-start penalty and a short load keep trials
// short.
func standInModel(t *testing.T, dir string) string {
	t.Helper()
	base := filepath.Join(dir, "model")
	if err := os.CopyFS(base, os.DirFS(emulatortest.Model(t, "ranker"))); err != nil {
		t.Fatal(err)
	}
	emulatortest.EditModel(t, base, func(m map[string]any) {
		m["load_time_ms"] = 100
		m["host"].(map[string]any)["preprocess_rounds"] = 1
		a := m["accelerator"].(map[string]any)
		a["launch_us"], a["item_us"], a["knee_items"], a["cold_runs"] = 10000, 1000, 16, 0
	})
	return base
}

// standInStudy is a study of the stand-in's ranker at 16 requests in
// flight over a two-point space: max_batch_size 16 (the clear winner while
// it fits) or 2.
func standInStudy(name, emulator, model, export, cron, measure string, rollout ...string) string {
	doc := fmt.Sprintf(`name: %s
target:
  runtime: process
  model: {name: ranker, base_path: %s}
  start_timeout: 20s
  process: {binary: %s}
load:
  mode: closed
  concurrency: 16
  connections: 2
  request_timeout: 5s
  payload:
    batch: 1
    inputs: [{name: features, dtype: DT_FLOAT, shape: [-1, 256]}]
  warmup: {requests: 20, max_duration: 3s}
  %s
slo: {latency: 2s, error_rate: 0.01}
space:
  max_batch_size: {values: [2, 16]}
  batch_timeout_micros: {values: [0]}
  num_batch_threads: {values: [1]}
  max_enqueued_batches: {values: [16]}
search: {strategy: bayes, trials: 2, seed: 1}
confirmation: {top_k: 2, repeats: 2}
export: {path: %s}
schedule:
  cron: %q
  trials: 4
  accept_margin: 0.05
  degradation_threshold: 0.1
`, name, model, emulator, measure, export, cron)
	if len(rollout) > 0 {
		doc += "  rollout: [" + strings.Join(rollout, ", ") + "]\n  rollout_timeout: 30s\n"
	}
	return doc
}

// countingRunner calls before with each run's number (from 1) before
// handing the run to the real runner: the test changes the model between
// runs without racing the schedule.
type countingRunner struct {
	inner  daemon.Runner
	before func(n int)
	mu     sync.Mutex
	n      int
}

func (c *countingRunner) Run(ctx context.Context, s *configs.Study, ro tuner.RunOptions, observe func(tuner.Event)) (*tuner.Report, error) {
	c.mu.Lock()
	c.n++
	n := c.n
	c.mu.Unlock()
	c.before(n)
	return c.inner.Run(ctx, s, ro, observe)
}

// leftovers lists live processes whose command line mentions dir.
func leftovers(dir string) []int { return emulatortest.ProcessesMentioning(dir) }

// TestScheduledRetuningOnStandIn: a study on a schedule of a few seconds.
// The first run recommends and rolls out; two runs where nothing changed
// keep the incumbent in at most 10 trials each; then the stand-in's model
// becomes slower and larger (a new version whose batches over 14 rows no
// longer fit the device, as an OOM), and the next run replaces the
// incumbent, writes the new batching.config to the export path and runs
// the rollout command on it. /metrics agrees with the store.
func TestScheduledRetuningOnStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stand-in for about a minute")
	}
	bin := binaries(t)
	dir := t.TempDir()
	model := standInModel(t, dir)
	studies, out := filepath.Join(dir, "studies"), filepath.Join(dir, "out")
	for _, d := range []string{studies, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	export := filepath.Join(out, "batching.config")
	rolloutLog, deployed := filepath.Join(out, "rollout.log"), filepath.Join(out, "deployed.config")
	rollout := filepath.Join(dir, "rollout.sh")
	// The rollout: what a user's script would do, copy the file where the
	// server reads it; and note which recommendation it was.
	if err := os.WriteFile(rollout, []byte("#!/bin/sh\nset -e\necho \"$BATCHTUNE_RECOMMENDATION $1\" >> "+rolloutLog+"\ncp \"$1\" "+deployed+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := standInStudy("ranker", filepath.Join(bin, "tfs-emulator"), model, export, "@every 2s", "min_duration: 1s\n  max_duration: 2s", rollout)
	if err := os.WriteFile(filepath.Join(studies, "ranker.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}

	db := storetest.Open(t)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	stateDir := filepath.Join(dir, "state")
	changed := make(chan struct{})
	runner := &countingRunner{
		inner: &daemon.TunerRunner{DB: db, StateDir: stateDir, Cores: 2, GPUs: 1, Logger: log},
		before: func(n int) {
			if n == 4 {
				// A new model version: twice the per-row device time, and
				// weights that leave room for 14 rows of activations.
				emulatortest.EditModel(t, model, func(m map[string]any) {
					a := m["accelerator"].(map[string]any)
					a["item_us"], a["weights_mib"] = 2000, 16300
				})
				close(changed)
			}
		},
	}
	d, err := daemon.New(db, studies, &daemon.Options{
		Logger: log, Runner: runner, Cores: 2, GPUs: 1,
		Checks: []configs.StudyCheck{configs.CheckFiles, tuner.SpaceCheck(2, 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler(daemon.APIOptions{}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, drain) }()
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	}()

	// Wait for four finished runs.
	deadline := time.Now().Add(8 * time.Minute)
	var runs []store.Run
	for {
		runs, _ = db.Runs(context.Background(), "ranker")
		finished := 0
		for _, r := range runs {
			if r.State == store.RunFinished || r.State == store.RunFailed {
				finished++
			}
		}
		if finished >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("4 runs did not finish in time; runs: %+v", runs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(drain)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the daemon did not stop within 2 minutes of the drain")
	}
	select {
	case <-changed:
	default:
		t.Fatal("the model was never changed")
	}

	bg := context.Background()
	runs, _ = db.Runs(bg, "ranker")
	for i, want := range []store.Outcome{store.OutcomeRecommended, store.OutcomeKept, store.OutcomeKept, store.OutcomeRecommended} {
		r := runs[i]
		trials, err := db.Trials(bg, "ranker", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: %s %s, %d trials: %s", r.ID, r.Kind, r.Outcome, len(trials), r.Detail)
		if r.Kind != store.KindScheduled || r.State != store.RunFinished || r.Outcome != want {
			t.Errorf("run %d: %s %s %s, want scheduled finished %s", r.ID, r.Kind, r.State, r.Outcome, want)
		}
		if want == store.OutcomeKept {
			if !strings.HasPrefix(r.Detail, "incumbent kept") {
				t.Errorf("run %d says %q, want it to say the incumbent was kept", r.ID, r.Detail)
			}
			if len(trials) > 10 {
				t.Errorf("run %d took %d trials to keep an unchanged incumbent, want at most 10", r.ID, len(trials))
			}
		}
	}
	if d := runs[3].Detail; !strings.HasPrefix(d, "changed:") {
		t.Errorf("run 4 says %q, want a change", d)
	}
	recs, err := db.Recommendations(bg, "ranker")
	if err != nil {
		t.Fatal(err)
	}
	var accepted []store.Recommendation
	for _, r := range recs {
		if r.Accepted {
			accepted = append(accepted, r)
		}
	}
	if len(accepted) != 2 {
		t.Fatalf("accepted recommendations: %+v, want 2 (runs 1 and 4)", accepted)
	}
	first, second := accepted[0], accepted[1]
	if first.Run != runs[0].ID || second.Run != runs[3].ID {
		t.Errorf("accepted in runs %d and %d, want %d and %d", first.Run, second.Run, runs[0].ID, runs[3].ID)
	}
	if !strings.Contains(first.Batching, "max_batch_size { value: 16 }") || !strings.Contains(second.Batching, "max_batch_size { value: 2 }") {
		t.Errorf("recommended\n%s\nthen\n%s\nwant max_batch_size 16, then 2 once 16 no longer fits", first.Batching, second.Batching)
	}
	// The new recommendation is in the export path, and the rollout
	// command ran on it, once per accepted change.
	if got, _ := os.ReadFile(export); string(got) != second.Batching {
		t.Errorf("export path holds\n%s\nwant the new recommendation\n%s", got, second.Batching)
	}
	if got, _ := os.ReadFile(deployed); string(got) != second.Batching {
		t.Errorf("the rollout deployed\n%s\nwant\n%s", got, second.Batching)
	}
	wantLog := fmt.Sprintf("%d %s\n%d %s\n", first.Seq, export, second.Seq, export)
	if got, _ := os.ReadFile(rolloutLog); string(got) != wantLog {
		t.Errorf("rollout log %q, want %q", got, wantLog)
	}
	if !strings.Contains(second.Note, "rollout ok") {
		t.Errorf("recommendation %d note %q, want the rollout recorded", second.Seq, second.Note)
	}

	// The degradation was loud.
	if !strings.Contains(logs.String(), `level=WARN msg="INCUMBENT DEGRADED" study=ranker`) {
		t.Error("the degraded incumbent was not logged at warn")
	}

	// /metrics agrees with the store.
	fams := scrape(t, srv.URL)
	all, _ := db.StudyTrials(bg, "ranker")
	byState := map[store.TrialState]float64{}
	for _, tr := range all {
		byState[tr.State]++
	}
	for state, n := range byState {
		if got, _ := metricValue(fams, "batchtune_trials_total", map[string]string{"study": "ranker", "state": string(state)}); got != n {
			t.Errorf("trials_total{state=%s} = %v, want %v as in the store", state, got, n)
		}
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"batchtune_runs_total", map[string]string{"study": "ranker", "outcome": "recommended"}, 2},
		{"batchtune_runs_total", map[string]string{"study": "ranker", "outcome": "kept"}, 2},
		{"batchtune_rollouts_total", map[string]string{"study": "ranker", "result": "ok"}, 2},
		{"batchtune_incumbent_degraded", map[string]string{"study": "ranker"}, 1},
		{"batchtune_incumbent_objective", map[string]string{"study": "ranker"}, second.Objective},
		{"batchtune_last_success_timestamp_seconds", map[string]string{"study": "ranker"}, float64(runs[3].Ended.UnixNano()) / 1e9},
	}
	for _, c := range checks {
		if got, ok := metricValue(fams, c.name, c.labels); !ok || fmt.Sprintf("%.6g", got) != fmt.Sprintf("%.6g", c.want) {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if left := leftovers(stateDir); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}
