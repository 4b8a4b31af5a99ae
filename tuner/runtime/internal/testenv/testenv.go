package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/runtimetest"
)

// Required reports whether BATCHTUNE_ENGINE=required: the engine, the
// stand-in image and binary must be there.
func Required() bool { return os.Getenv("BATCHTUNE_ENGINE") == "required" }

// Unavailable skips t, or fails it when Required, saying what is missing.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("BATCHTUNE_ENGINE=required: %s", msg)
	}
	t.Skipf("%s (set BATCHTUNE_ENGINE=required to make this a failure)", msg)
}

// RepoRoot is the directory holding go.mod, found upwards from the test's
// working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

var (
	fakeOnce sync.Once
	fakePath string
	fakeErr  error
)

// FakeServer builds testdata/fakeserver as a static binary (once per test
// process, into a directory removed by Cleanup) and returns its path.
func FakeServer(t testing.TB) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "batchtune-fakeserver")
		if err != nil {
			fakeErr = err
			return
		}
		fakePath = filepath.Join(dir, "fakeserver")
		cmd := exec.Command("go", "build", "-o", fakePath, "./tuner/runtime/testdata/fakeserver")
		cmd.Dir = RepoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fakeErr = fmt.Errorf("building the fake server: %v\n%s", err, out)
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakePath
}

// CleanupFake removes the built fake server; call it from TestMain.
func CleanupFake() {
	if fakePath != "" {
		os.RemoveAll(filepath.Dir(fakePath))
	}
}

// The fake server's batching configs and its test-only flags.
var (
	GoodBatching     = []byte("max_batch_size { value: 16 }\nbatch_timeout_micros { value: 2000 }\nmax_enqueued_batches { value: 8 }\nnum_batch_threads { value: 2 }\n")
	RejectedBatching = []byte("max_batch_size { value: 0 }\nbatch_timeout_micros { value: -5 }\n")
)

// FakeHarness fills in the fake server's side of a conformance harness:
// model, configs, crash and slow flags, and Check.
func FakeHarness(h runtimetest.Harness) runtimetest.Harness {
	h.Model = "fake"
	h.Good = GoodBatching
	h.Rejected = RejectedBatching
	h.RejectedLog = "max_batch_size: must be positive"
	h.CrashFlags = []string{"--fake_crash_after=300ms"}
	h.CrashCode = 3
	h.CrashLog = "simulated crash: device lost"
	h.IgnoreTermFlags = []string{"--fake_ignore_term"}
	h.SlowLoadFlags = []string{"--fake_load_delay=30s"}
	h.Check = CheckFake
	return h
}

// FakeState is what the fake server says it was started with.
type FakeState struct {
	Args          []string `json:"args"`
	ModelName     string   `json:"model_name"`
	ModelBasePath string   `json:"model_base_path"`
	Batching      string   `json:"batching"`
	IntraOp       string   `json:"intra_op"`
	InterOp       string   `json:"inter_op"`
	Env           []string `json:"env"`
}

// GetFakeState asks a running fake server what it was started with.
func GetFakeState(t testing.TB, s runtime.Server) FakeState {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + s.Endpoints().REST + "/fake/state")
	if err != nil {
		t.Fatalf("fake state: %v", err)
	}
	defer resp.Body.Close()
	var st FakeState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("fake state: %v", err)
	}
	return st
}

// CheckFake asserts that the fake server read cfg's batching.config and got
// its parallelism, its flags and the ones every trial must have.
func CheckFake(t *testing.T, s runtime.Server, cfg runtime.Config) {
	t.Helper()
	st := GetFakeState(t, s)
	if st.Batching != string(cfg.Batching) {
		t.Errorf("server read batching.config %q, want %q", st.Batching, cfg.Batching)
	}
	if st.IntraOp != strconv.Itoa(cfg.IntraOpParallelism) || st.InterOp != strconv.Itoa(cfg.InterOpParallelism) {
		t.Errorf("server parallelism intra %q inter %q, want %d and %d", st.IntraOp, st.InterOp, cfg.IntraOpParallelism, cfg.InterOpParallelism)
	}
	for _, f := range append([]string{"--enable_batching", "--max_num_load_retries=0"}, cfg.Flags...) {
		if !slices.Contains(st.Args, f) {
			t.Errorf("server args %q lack %q", st.Args, f)
		}
	}
	if st.ModelName != "fake" {
		t.Errorf("server model name %q, want fake", st.ModelName)
	}
}

// TrialDirs lists the trial directories left under stateDir.
func TrialDirs(stateDir string) []string {
	m, _ := filepath.Glob(filepath.Join(stateDir, "*", "trial-*"))
	return m
}

// ProcessesMentioning lists the live processes (not zombies) whose command
// line contains s, as "pid: cmdline".
func ProcessesMentioning(s string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(p, "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z") {
			continue
		}
		out = append(out, filepath.Base(p)+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// StandInInfo is how the runtime tests run the project's TF Serving
// stand-in (cmd/tfs-emulator) with one of its bundled models.
type StandInInfo struct {
	Model         string // model name
	HostModelPath string // the model's base path on this machine
	Image         string // the stand-in's image (make image)
	Good          []byte // a batching.config it accepts for Model
	Rejected      []byte // one it refuses at load
	RejectedLog   string // a piece of what it says then
}

// StandInImage is the image make image builds.
const StandInImage = "localhost/tfs-emulator:dev"

// StandIn describes a bundled model of the stand-in under configs/models:
// BATCHTUNE_STANDIN_MODEL, or the first on the accelerator device model
// (the one tuning is shown on), or the first. BATCHTUNE_STANDIN_IMAGE
// replaces the image.
func StandIn(t testing.TB, root string) StandInInfo {
	t.Helper()
	models := filepath.Join(root, "configs", "models")
	name := os.Getenv("BATCHTUNE_STANDIN_MODEL")
	if name == "" {
		entries, err := os.ReadDir(models)
		if err != nil {
			Unavailable(t, "stand-in models: %v", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			if name == "" {
				name = e.Name()
			}
			desc, _ := filepath.Glob(filepath.Join(models, e.Name(), "*", "model.json"))
			if len(desc) > 0 {
				var m struct {
					Device string `json:"device"`
				}
				if data, err := os.ReadFile(desc[0]); err == nil && json.Unmarshal(data, &m) == nil && m.Device == "accelerator" {
					name = e.Name()
					break
				}
			}
		}
	}
	if name == "" {
		Unavailable(t, "no stand-in model under %s", models)
	}
	img := os.Getenv("BATCHTUNE_STANDIN_IMAGE")
	if img == "" {
		img = StandInImage
	}
	return StandInInfo{
		Model:         name,
		HostModelPath: filepath.Join(models, name),
		Image:         img,
		Good:          []byte("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 1000 }\nmax_enqueued_batches { value: 16 }\nnum_batch_threads { value: 2 }\n"),
		Rejected:      []byte("max_batch_size { value: 0 }\n"),
		RejectedLog:   "max_batch_size",
	}
}
