package process_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	"github.com/batchtune/batchtune/tuner/runtime/process"
	"github.com/batchtune/batchtune/tuner/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(crashChild())
	}
	code := m.Run()
	testenv.CleanupFake()
	emulatortest.Cleanup()
	os.Exit(code)
}

func newFake(t testing.TB, stateDir string, mod func(*process.Options)) *process.Runtime {
	t.Helper()
	opts := process.Options{
		Binary:        testenv.FakeServer(t),
		ModelName:     "fake",
		ModelBasePath: t.TempDir(),
		StateDir:      stateDir,
		StopGrace:     time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	rt, err := process.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func leftovers(t *testing.T, stateDir string) []string {
	return append(testenv.ProcessesMentioning(stateDir), testenv.TrialDirs(stateDir)...)
}

func kill(t *testing.T, s runtime.Server) {
	pid, ok := process.PID(s)
	if !ok {
		t.Fatalf("not a process server: %T", s)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceFake runs the suite over the process runtime with the
// tests' own fake server, which can crash and ignore SIGTERM on request.
func TestConformanceFake(t *testing.T) {
	runtimetest.Run(t, testenv.FakeHarness(runtimetest.Harness{
		New: func(t *testing.T, dir string) runtime.Runtime {
			return newFake(t, dir, nil)
		},
		Leftovers: leftovers,
		Kill:      kill,
	}))
}

// TestConformanceStandIn runs the suite over the process runtime with the
// project's TF Serving stand-in, built from this tree.
func TestConformanceStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("the stand-in suite runs without -short; the fake server's covers the mechanics")
	}
	root := testenv.RepoRoot(t)
	bin := emulatortest.Emulator(t) // built from this tree, never a stale bin/
	si := testenv.StandIn(t, root)
	runtimetest.Run(t, runtimetest.Harness{
		New: func(t *testing.T, dir string) runtime.Runtime {
			rt, err := process.New(process.Options{
				Binary:        bin,
				ModelName:     si.Model,
				ModelBasePath: si.HostModelPath,
				StateDir:      dir,
				StopGrace:     2 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			return rt
		},
		Leftovers:   leftovers,
		Kill:        kill,
		Model:       si.Model,
		Good:        si.Good,
		Rejected:    si.Rejected,
		RejectedLog: si.RejectedLog,
	})
}

func TestNewOptionsProblems(t *testing.T) {
	tests := []struct {
		name string
		opts process.Options
		want []string // pieces of the error, every one must be there
	}{
		// Every problem is reported at once, each naming its field.
		{"all at once", process.Options{
			Binary:   "/nonexistent/tensorflow_model_server",
			Study:    "../escape",
			GRPCPort: 70000,
			Args:     []string{"--port=1", "model_name=x"},
		}, []string{"study:", "binary:", "grpc_port: must be in 0..65535, got 70000", "args[0]: --port", "args[1]: \"model_name=x\""}},
		// The same port twice cannot work.
		{"same ports", process.Options{Binary: "true", GRPCPort: 9000, RESTPort: 9000}, []string{"rest_port: must differ from grpc_port (9000)"}},
		// No binary at all.
		{"no binary", process.Options{}, []string{"binary: must name the server"}},
		// --model_name is the runtime's when ModelName is set.
		{"model name twice", process.Options{Binary: "true", ModelName: "m", Args: []string{"--model_name=n"}}, []string{"args[0]: --model_name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := process.New(tt.opts)
			if err == nil {
				t.Fatal("New: got nil error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestModelNameInArgsWithoutOption: with ModelName unset, the study may pass
// --model_name itself (e.g. beside --model_config_file).
func TestModelNameInArgsWithoutOption(t *testing.T) {
	if _, err := process.New(process.Options{Binary: "true", Args: []string{"--model_name=n", "--model_base_path=/m"}}); err != nil {
		t.Fatal(err)
	}
}

func TestConfigRefused(t *testing.T) {
	rt := newFake(t, t.TempDir(), nil)
	if err := rt.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer rt.Restore(context.Background())
	_, err := rt.Start(context.Background(), runtime.Config{Batching: testenv.GoodBatching, IntraOpParallelism: -1, Flags: []string{"--enable_batching=false"}})
	if !errors.Is(err, runtime.ErrReservedFlag) {
		t.Fatalf("Start with a reserved flag: got %v, want ErrReservedFlag", err)
	}
	if !strings.Contains(err.Error(), "intra_op_parallelism: must not be negative") {
		t.Errorf("error does not name the negative parallelism: %v", err)
	}
}

// TestFixedPorts: ports from the study are used as given, and a port that
// is taken fails Start with ErrPortInUse naming it, before anything runs.
func TestFixedPorts(t *testing.T) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	free := freePorts(t, 2)

	dir := t.TempDir()
	rt := newFake(t, dir, func(o *process.Options) { o.GRPCPort, o.RESTPort = free[0], free[1] })
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Restore(ctx)
	srv, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.Endpoints{GRPC: "127.0.0.1:" + strconv.Itoa(free[0]), REST: "127.0.0.1:" + strconv.Itoa(free[1])}
	if diff := cmp.Diff(want, srv.Endpoints()); diff != "" {
		t.Errorf("Endpoints (-want +got):\n%s", diff)
	}
	if err := runtime.WaitPorts(ctx, srv); err != nil {
		t.Fatal(err)
	}
	// The same fixed ports again: Start stops the previous server first,
	// so they are free by the time they are checked.
	srv2, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if err != nil {
		t.Fatalf("restart on the same fixed ports: %v", err)
	}
	if err := runtime.WaitPorts(ctx, srv2); err != nil {
		t.Fatal(err)
	}

	rt2 := newFake(t, t.TempDir(), func(o *process.Options) { o.GRPCPort = busy })
	if err := rt2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt2.Restore(ctx)
	_, err = rt2.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if !errors.Is(err, runtime.ErrPortInUse) || !strings.Contains(err.Error(), strconv.Itoa(busy)) || !strings.Contains(err.Error(), "gRPC") {
		t.Fatalf("Start on a busy port: got %v, want ErrPortInUse naming gRPC port %d", err, busy)
	}
}

func freePorts(t *testing.T, n int) []int {
	var out []int
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out
}

// TestBinaryNotExecutable: a binary that cannot be run fails Start with the
// exec error, and leaves no trial files.
func TestBinaryNotExecutable(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(bin, []byte("not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rt, err := process.New(process.Options{Binary: bin, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Restore(ctx)
	_, err = rt.Start(ctx, runtime.Config{})
	if !errors.Is(err, syscall.ENOEXEC) {
		t.Fatalf("Start of a non-program: got %v, want ENOEXEC", err)
	}
	if left := testenv.TrialDirs(dir); len(left) > 0 {
		t.Errorf("trial files left: %q", left)
	}
}

// TestLogTailBounded: a server that writes far more than the ring holds is
// reported with its last lines, and the ring does not grow.
func TestLogTailBounded(t *testing.T) {
	script := filepath.Join(t.TempDir(), "chatty")
	body := "#!/bin/sh\ni=0\nwhile [ $i -lt 5000 ]; do echo \"line $i of a chatty server\"; i=$((i+1)); done\necho last words >&2\nexit 7\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	rt, err := process.New(process.Options{Binary: script, StateDir: t.TempDir(), LogBytes: 4096, TailLines: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Restore(ctx)
	srv, err := rt.Start(ctx, runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Done():
	case <-time.After(time.Minute):
		t.Fatal("chatty server not reported as ended")
	}
	e := srv.Exit()
	want := "line 4998 of a chatty server\nline 4999 of a chatty server\nlast words"
	if diff := cmp.Diff(want, e.Log); diff != "" {
		t.Errorf("Exit.Log (-want +got):\n%s", diff)
	}
	if e.Code != 7 || e.Signal != "" || e.Stopped {
		t.Errorf("Exit: got %+v, want code 7", e)
	}
	if got, want := e.Reason(), "exit code 7: last words"; got != want {
		t.Errorf("Reason: got %q, want %q", got, want)
	}
}

// startChild starts a batchtune (this test binary) that runs one trial of
// binary with its state in dir and waits to be killed; it returns the
// child and its server's PID once the server runs.
func startChild(t *testing.T, dir, binary, model string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, "CHILD_BINARY="+binary, "CHILD_MODEL="+model)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 256)
	n, _ := stdout.Read(buf)
	var pid int
	line := strings.TrimSpace(string(buf[:n]))
	if rest, ok := strings.CutPrefix(line, "READY "); ok {
		pid, _ = strconv.Atoi(rest)
	}
	if pid == 0 {
		t.Fatalf("child said %q", line)
	}
	return cmd, pid
}

// TestRecoverKillsLeftover: the server of a batchtune that was killed with
// SIGKILL does not outlive it (parent-death signal), and the next Recover
// removes the trial's files and claims the study.
func TestRecoverKillsLeftover(t *testing.T) {
	dir := t.TempDir()
	child, pid := startChild(t, dir, testenv.FakeServer(t), "fake")
	if groupSize(pid) == 0 {
		t.Fatal("the child's server is not running: the test cannot tell anything")
	}
	child.Process.Kill()
	child.Wait()

	rt := newFake(t, dir, nil)
	if err := rt.Recover(context.Background()); err != nil {
		t.Fatalf("Recover after a killed batchtune: %v", err)
	}
	defer rt.Restore(context.Background())
	waitGroupSize(t, pid, 0)
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("left after Recover: %q", left)
	}
}

// TestRecoverKillsSurvivor: when part of the server outlives batchtune (a
// grandchild in its process group, which the parent-death signal does not
// reach), the next Recover ends the whole group from the trial's record.
func TestRecoverKillsSurvivor(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(t.TempDir(), "forker")
	// The leader waits; its child, in the same group, ignores SIGTERM.
	body := "#!/bin/sh\n(trap '' TERM; exec sleep 300) &\nsleep 300\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	child, pid := startChild(t, dir, script, "")
	waitGroupSize(t, pid, 3) // sh, the subshell's sleep, sleep
	child.Process.Kill()
	child.Wait()
	// The leader dies of the parent-death signal; the grandchild stays.
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := groupSize(pid); n == 0 {
		t.Fatal("nothing of the group survived batchtune: the test cannot tell anything")
	}

	rt, err := process.New(process.Options{Binary: script, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Recover(context.Background()); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	defer rt.Restore(context.Background())
	if n := groupSize(pid); n != 0 {
		t.Errorf("Recover left %d processes of the group", n)
	}
	if left := testenv.TrialDirs(dir); len(left) > 0 {
		t.Errorf("Recover left %q", left)
	}
}

func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(data[i+1:])), "Z")
}

func groupSize(pgid int) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

func waitGroupSize(t *testing.T, pgid, n int) {
	deadline := time.Now().Add(30 * time.Second)
	for groupSize(pgid) != n {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d never reached %d members", pgid, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const childEnv = "BATCHTUNE_PROCESS_TEST_CHILD"

// crashChild is the batchtune that gets killed: it starts one trial and
// says READY and its server's PID.
func crashChild() int {
	rt, err := process.New(process.Options{
		Binary:    os.Getenv("CHILD_BINARY"),
		ModelName: os.Getenv("CHILD_MODEL"),
		StateDir:  os.Getenv(childEnv),
	})
	if err != nil {
		os.Stdout.WriteString("ERR " + err.Error())
		return 1
	}
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		os.Stdout.WriteString("ERR " + err.Error())
		return 1
	}
	srv, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if err != nil {
		os.Stdout.WriteString("ERR " + err.Error())
		return 1
	}
	pid, _ := process.PID(srv)
	os.Stdout.WriteString("READY " + strconv.Itoa(pid) + "\n")
	time.Sleep(10 * time.Minute)
	return 0
}
