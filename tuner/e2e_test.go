package tuner_test

// End-to-end tests: the tuner against the real stand-in (bin/tfs-emulator
// built from this tree), through the real runtimes, probe and store. The
// failure tests run everywhere; the docker test needs a container engine
// (make test starts one and sets BATCHTUNE_ENGINE=required).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/runtime"
	_ "github.com/batchtune/batchtune/tuner/runtime/docker"  // registers target.runtime docker
	_ "github.com/batchtune/batchtune/tuner/runtime/process" // registers target.runtime process
)

func TestMain(m *testing.M) { emulatortest.Main(m) }

// binaries builds tfs-emulator and batchtune from this tree once per test
// binary and returns the directory holding them.
func binaries(t *testing.T) string {
	t.Helper()
	return emulatortest.Binaries(t, "tfs-emulator", "batchtune")
}

// processStudy is a small study of the stand-in's ranker through the
// process runtime; body adds or overrides sections (later keys win is not
// YAML: pass only sections not in the base).
func processStudy(t *testing.T, binary, modelBase, space, extra string) *configs.Study {
	t.Helper()
	doc := fmt.Sprintf(`name: e2e
target:
  runtime: process
  model: {name: ranker, base_path: %s}
  start_timeout: 20s
  process: {binary: %s}
load:
  mode: closed
  concurrency: 16
  connections: 2
  request_timeout: 2s
  payload:
    batch: 1
    inputs: [{name: features, dtype: DT_FLOAT, shape: [-1, 256]}]
  warmup: {requests: 50, max_duration: 5s}
  min_duration: 2s
  max_duration: 4s
slo:
  latency: 60ms
objective: max_throughput
space:
%s
%s`, modelBase, binary, space, extra)
	s, err := configs.ParseStudy(filepath.Join(t.TempDir(), "e2e.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runStudy runs s once with the runtime its target names.
func runStudy(t *testing.T, ctx context.Context, s *configs.Study, db *store.DB) (*tuner.Report, error) {
	t.Helper()
	rt, err := runtime.New(s.Target, runtime.Options{Study: s.Name, StateDir: t.TempDir()})
	if err != nil {
		return nil, err
	}
	tu, err := tuner.New(s, db, rt, nil, &tuner.Options{Cores: 2, GPUs: 1})
	if err != nil {
		return nil, err
	}
	return tu.Run(ctx, tuner.RunOptions{})
}

func TestE2EConfigThatDoesNotFitFailsFastAndTheStudyGoesOn(t *testing.T) {
	bin := binaries(t)
	s := processStudy(t, bin+"/tfs-emulator", emulatortest.ModelCopy(t, "ranker", nil), `  max_batch_size: {values: [2048, 16]}
  batch_timeout_micros: {values: [1000]}`, "search: {strategy: grid, trials: 2}\nconfirmation: {top_k: 1, repeats: 2}\n")
	db := storetest.Open(t)
	rep, err := runStudy(t, context.Background(), s, db)
	if err != nil {
		t.Fatal(err)
	}
	logTrials(t, rep)
	if len(rep.Trials) < 2 {
		t.Fatalf("%d trials, want both configurations run", len(rep.Trials))
	}
	oom, fits := rep.Trials[0], rep.Trials[1]
	if oom.Config[0].Value != 2048 {
		oom, fits = fits, oom
	}
	if oom.State != store.TrialFailed || !strings.Contains(oom.Reason, "does not fit the device memory") {
		t.Fatalf("trial 1 (max_batch_size 2048): %s %q, want failed for device memory", oom.State, oom.Reason)
	}
	if d := oom.Phases[len(oom.Phases)-1].At.Sub(oom.Phases[0].At); d > 10*time.Second {
		t.Errorf("the OOM trial took %s; with --max_num_load_retries=0 it should fail in seconds", d)
	}
	if !strings.Contains(oom.LogTail, "OOM") {
		t.Errorf("log tail %q lacks the server's OOM line", oom.LogTail)
	}
	if fits.State == store.TrialFailed || fits.Objective == nil {
		t.Errorf("max_batch_size 16: %s %q, want measured", fits.State, fits.Reason)
	}
}

func TestE2EServerCrashMidMeasurementIsAFailedTrial(t *testing.T) {
	bin := binaries(t)
	// The server kills itself 4 s after it starts: after load (1.5 s) and
	// warmup, inside a measurement that lasts at least 6 s.
	wrapper := filepath.Join(t.TempDir(), "crashing-server")
	script := fmt.Sprintf("#!/bin/sh\n( sleep 4; kill -9 $$ ) &\nexec %s \"$@\"\n", bin+"/tfs-emulator")
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := processStudy(t, wrapper, emulatortest.ModelCopy(t, "ranker", nil), `  max_batch_size: {values: [8, 16, 32]}`,
		"search: {strategy: grid, trials: 3, max_failures: 2}\nconfirmation: {top_k: 1, repeats: 2}\n")
	// A generous SLO, so that no early stop ends a measurement before the crash.
	s.SLO.Latency = configs.Duration(3 * time.Second)
	s.Load.MinDuration = configs.Duration(6 * time.Second)
	s.Load.MaxDuration = configs.Duration(8 * time.Second)
	db := storetest.Open(t)
	start := time.Now()
	rep, err := runStudy(t, context.Background(), s, db)
	logTrials(t, rep)
	if !errors.Is(err, tuner.ErrTooManyFailures) {
		t.Fatalf("err = %v, want ErrTooManyFailures after two crashes", err)
	}
	if len(rep.Trials) != 2 {
		t.Fatalf("%d trials, want 2", len(rep.Trials))
	}
	for _, tr := range rep.Trials {
		if tr.State != store.TrialFailed || !strings.Contains(tr.Reason, "server exited: killed by signal") {
			t.Errorf("trial %d: %s %q, want failed: server exited: killed by signal", tr.Seq, tr.State, tr.Reason)
		}
	}
	if d := time.Since(start); d > 40*time.Second {
		t.Errorf("two crashed trials took %s: the crash was not noticed promptly", d)
	}
}

func TestE2EServerThatNeverBecomesReady(t *testing.T) {
	bin := binaries(t)
	slow := emulatortest.ModelCopy(t, "ranker", func(m map[string]any) { m["load_time_ms"] = 600000 })
	s := processStudy(t, bin+"/tfs-emulator", slow, `  max_batch_size: {values: [8]}`,
		"search: {strategy: grid, trials: 1}\nconfirmation: {top_k: 1, repeats: 2}\n")
	s.Target.StartTimeout = configs.Duration(3 * time.Second)
	db := storetest.Open(t)
	start := time.Now()
	rep, err := runStudy(t, context.Background(), s, db)
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Trials[0]
	if tr.State != store.TrialFailed || !strings.Contains(tr.Reason, "not ready") {
		t.Errorf("trial: %s %q, want failed: not ready", tr.State, tr.Reason)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s for a 3 s start timeout", d)
	}
	if rep.Recommendation != nil || rep.Run.Outcome != store.OutcomeNoFeasible {
		t.Errorf("outcome %s, recommendation %v; want no_feasible and none", rep.Run.Outcome, rep.Recommendation)
	}
}

func TestE2EEngineNotReachable(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	s := processStudy(t, "/bin/true", "/models/ranker", `  max_batch_size: {values: [8]}`, "")
	s.Target.Runtime = configs.RuntimeDocker
	s.Target.Docker = configs.DockerTarget{Image: "localhost/tfs-emulator:dev", Pull: configs.PullNever}
	db := storetest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := runStudy(t, ctx, s, db)
	if err == nil || !strings.Contains(err.Error(), "no-engine.sock") {
		t.Fatalf("err = %v, want a clear error naming the engine's socket", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s to report an unreachable engine", d)
	}
	if runs, _ := db.Runs(context.Background(), "e2e"); len(runs) != 0 {
		t.Errorf("a run was created although the engine never answered: %+v", runs)
	}
}

// engineRequired fails (under make test) or skips (a plain go test on a
// machine without an engine) when no container engine answers.
func engineRequired(t *testing.T) {
	t.Helper()
	if os.Getenv("DOCKER_HOST") != "" {
		return
	}
	if os.Getenv("BATCHTUNE_ENGINE") == "required" {
		t.Fatal("BATCHTUNE_ENGINE=required but DOCKER_HOST is not set (run .ci/engine-up)")
	}
	t.Skip("no container engine: DOCKER_HOST is not set (make test starts one)")
}

func TestE2EDockerFindsAClearlyBetterConfiguration(t *testing.T) {
	if testing.Short() {
		t.Skip("several minutes of trials; run without -short")
	}
	engineRequired(t)
	image := os.Getenv("BATCHTUNE_STANDIN_IMAGE")
	if image == "" {
		image = "localhost/tfs-emulator:dev"
	}
	abs := emulatortest.Model(t, "ranker")
	export := filepath.Join(t.TempDir(), "batching.config")
	doc := fmt.Sprintf(`name: e2e-docker
target:
  runtime: docker
  model: {name: ranker, base_path: /models/ranker}
  start_timeout: 60s
  docker: {image: %s, pull: never, model_dir: %s}
load:
  mode: closed
  concurrency: 32
  connections: 2
  request_timeout: 2s
  payload:
    batch: 1
    inputs: [{name: features, dtype: DT_FLOAT, shape: [-1, 256]}]
  warmup: {requests: 100, max_duration: 5s}
  min_duration: 3s
  max_duration: 8s
slo:
  latency: 100ms
objective: max_throughput
space:
  max_batch_size: {min: 4, max: 64, scale: pow2}
  batch_timeout_micros: {values: [0, 1000, 2000, 5000, 10000, 20000]}
  num_batch_threads: {values: [1, 2]}
  max_enqueued_batches: {values: [4, 16, 64]}
  grpc_max_threads: {values: [8, 64]}
search: {strategy: bayes, trials: 16, seed: 7}
confirmation: {top_k: 2, repeats: 3}
export: {path: %s}
`, image, abs, export)
	s, err := configs.ParseStudy(filepath.Join(t.TempDir(), "docker.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	rep, err := runStudy(t, context.Background(), s, db)
	if err != nil {
		t.Fatal(err)
	}
	logTrials(t, rep)
	// What holds on a busy machine too (issue 15: with other jobs on the
	// two cores the SLO verdicts flipped and the run recommended nothing):
	// relative orderings with margins, measured side by side in the
	// interleaved confirmation, not absolute SLO verdicts.
	conf := rep.Confirmation
	if conf == nil || len(conf.Candidates) == 0 {
		t.Fatalf("no configuration reached confirmation: %s", rep.Run.Detail)
	}
	best := conf.Candidates[0]
	for _, c := range conf.Candidates[1:] {
		if c.Estimate.Mean > best.Estimate.Mean {
			best = c
		}
	}
	// Clearly better than TF's defaults: a third more throughput, or the
	// defaults measured nothing at all.
	base := conf.Baseline
	if base.Estimate.Mean > 0 && !(best.Estimate.Mean >= 1.33*base.Estimate.Mean) {
		t.Errorf("best candidate %s %.0f req/s, TF defaults %.0f req/s: want at least a third more", best.Label, best.Estimate.Mean, base.Estimate.Mean)
	}
	// At least as good as the seeds' recipe, within the noise of a loaded
	// machine.
	for _, c := range conf.Candidates {
		if c.Label == "seed recipe" && c.Estimate.Mean > 0 && best.Estimate.Mean < 0.9*c.Estimate.Mean {
			t.Errorf("best candidate %.0f req/s below the seed recipe's %.0f", best.Estimate.Mean, c.Estimate.Mean)
		}
	}
	if rep.Recommendation == nil {
		// The SLO verdict is the machine's load as much as the
		// configuration's: say so, do not fail on it.
		t.Logf("no recommendation on this machine (%s); the orderings above held", rep.Run.Detail)
		return
	}
	// The exported file is accepted by the stand-in.
	acceptsConfig(t, binaries(t)+"/tfs-emulator", abs, export)
}

// acceptsConfig starts the stand-in with the batching.config at path and
// waits until it serves the model.
func acceptsConfig(t *testing.T, binary, modelBase, path string) {
	t.Helper()
	port := emulatortest.FreePort(t)
	cmd := exec.Command(binary, fmt.Sprintf("--port=%d", port), "--model_name=ranker", "--model_base_path="+modelBase,
		"--enable_batching", "--batching_parameters_file="+path, "--max_num_load_retries=0")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := probe.WaitReady(ctx, probe.Target{Addr: fmt.Sprintf("127.0.0.1:%d", port), Model: "ranker"}, 30*time.Second, nil); err != nil {
		t.Errorf("the stand-in did not accept the exported %s: %v\n%s", path, err, out.String())
	}
}

func logTrials(t *testing.T, rep *tuner.Report) {
	t.Helper()
	if rep == nil {
		return
	}
	for _, tr := range rep.Trials {
		t.Logf("trial %d %-9s %-13s %v qps=%.0f p99=%s %s", tr.Seq, tr.Role, tr.State, tr.Config, tr.Summary.Throughput, tr.Summary.P99, tr.Reason)
	}
}
