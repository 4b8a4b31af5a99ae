package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batchtune/batchtune/internal/atomicfile"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/latch"
	"github.com/batchtune/batchtune/tuner/runtime/internal/logtail"
	"github.com/batchtune/batchtune/tuner/runtime/internal/ports"
	"github.com/batchtune/batchtune/tuner/runtime/internal/statedir"
)

// Defaults for the zero values of Options.
const (
	DefaultHost      = "127.0.0.1"
	DefaultStopGrace = 5 * time.Second
	DefaultLogBytes  = 256 << 10
	DefaultTailLines = 50
)

// killWait bounds how long Stop waits for a SIGKILLed server to be reaped.
const killWait = 5 * time.Second

// Options configure a process runtime. The zero value of every field but
// Binary has a documented default.
type Options struct {
	// Binary is the server: tensorflow_model_server, the stand-in
	// tfs-emulator, a path or a name looked up in PATH.
	Binary string
	// ModelName and ModelBasePath become --model_name and
	// --model_base_path when set (leave them empty to pass
	// --model_config_file in Args instead).
	ModelName     string
	ModelBasePath string
	// Args are the study's extra server flags, the same for every trial.
	Args []string
	// Env is added to batchtune's own environment for the server.
	Env []string
	// Host is the address the endpoints name; default 127.0.0.1. The
	// server itself listens on all interfaces, as TF Serving does.
	Host string
	// GRPCPort and RESTPort fix the ports; 0 picks a free one per Start.
	GRPCPort int
	RESTPort int
	// StateDir holds a directory per study, with a directory per trial for
	// its files and the record of its process; default statedir.Default().
	StateDir string
	// Study names the study's directory and lock; default "default".
	Study string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL;
	// default 5s.
	StopGrace time.Duration
	// LogBytes bounds the ring the server's output is kept in (default
	// 256 KiB); TailLines is how many of its last lines Exit.Log holds
	// (default 50).
	LogBytes  int
	TailLines int
	// Logger receives trial-level events; nil discards them.
	Logger *slog.Logger
}

// Runtime runs the server as a child process in its own process group. It
// implements runtime.Runtime.
type Runtime struct {
	opts Options
	bin  string
	dir  string // StateDir/Study
	log  *slog.Logger

	mu   sync.Mutex
	lock *statedir.Lock
	cur  *server
	seq  int
}

var _ runtime.Runtime = (*Runtime)(nil)

// New checks opts, fills in the defaults and finds the binary. It starts
// nothing: call Recover next.
func New(opts Options) (*Runtime, error) {
	var errs []string
	if opts.Study == "" {
		opts.Study = statedir.DefaultStudy
	}
	if err := statedir.CheckStudy(opts.Study); err != nil {
		errs = append(errs, "study: "+err.Error())
	}
	var bin string
	if opts.Binary == "" {
		errs = append(errs, "binary: must name the server (tensorflow_model_server or tfs-emulator)")
	} else if p, err := exec.LookPath(opts.Binary); err != nil {
		errs = append(errs, fmt.Sprintf("binary: %v", err))
	} else if bin, err = filepath.Abs(p); err != nil {
		errs = append(errs, fmt.Sprintf("binary: %v", err))
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"grpc_port", opts.GRPCPort}, {"rest_port", opts.RESTPort}} {
		if p.v < 0 || p.v > 65535 {
			errs = append(errs, fmt.Sprintf("%s: must be in 0..65535, got %d", p.name, p.v))
		}
	}
	if opts.GRPCPort != 0 && opts.GRPCPort == opts.RESTPort {
		errs = append(errs, fmt.Sprintf("rest_port: must differ from grpc_port (%d)", opts.GRPCPort))
	}
	var reserved []string
	if opts.ModelName != "" {
		reserved = append(reserved, "model_name")
	}
	if opts.ModelBasePath != "" {
		reserved = append(reserved, "model_base_path")
	}
	if err := runtime.CheckFlags("args", opts.Args, reserved...); err != nil {
		errs = append(errs, err.Error())
	}
	if opts.StopGrace < 0 {
		errs = append(errs, fmt.Sprintf("stop_grace: must not be negative, got %v", opts.StopGrace))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("process: options:\n  %s", strings.Join(errs, "\n  "))
	}
	if opts.Host == "" {
		opts.Host = DefaultHost
	}
	if opts.StateDir == "" {
		opts.StateDir = statedir.Default()
	}
	// The server runs in its trial directory, so the paths the runtime
	// hands it must not be relative to batchtune's working directory.
	if abs, err := filepath.Abs(opts.StateDir); err == nil {
		opts.StateDir = abs
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.LogBytes <= 0 {
		opts.LogBytes = DefaultLogBytes
	}
	if opts.TailLines <= 0 {
		opts.TailLines = DefaultTailLines
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Runtime{
		opts: opts,
		bin:  bin,
		dir:  filepath.Join(opts.StateDir, opts.Study),
		log:  log.With("runtime", "process", "study", opts.Study),
	}, nil
}

// record is what a trial directory keeps about its process, so that a later
// batchtune can end it if this one is killed. StartTicks (field 22 of
// /proc/PID/stat) tells the process apart from a later one given the same PID.
type record struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	Binary     string `json:"binary"`
}

const recordFile = "process.json"

// Recover ends the processes of trials an earlier batchtune left running in
// this study's directory, removes their files, and claims the directory.
// Calling it again while holding the directory does nothing.
func (r *Runtime) Recover(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lock != nil {
		return nil
	}
	lock, err := statedir.Acquire(r.dir, r.opts.Study)
	if err != nil {
		return fmt.Errorf("process: %w", err)
	}
	dirs, err := statedir.TrialDirs(r.dir)
	if err != nil {
		lock.Release()
		return fmt.Errorf("process: %w", err)
	}
	var errs []error
	for _, d := range dirs {
		if err := r.recoverTrial(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		lock.Release()
		return err
	}
	r.lock = lock
	return nil
}

func (r *Runtime) recoverTrial(ctx context.Context, dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err == nil {
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil {
			return fmt.Errorf("process: leftover %s: %w", filepath.Join(dir, recordFile), err)
		}
		if r.ours(rec) {
			r.log.Warn("ending a leftover trial server", "pid", rec.PID, "dir", dir)
			syscall.Kill(-rec.PID, syscall.SIGKILL)
			if err := waitGroupGone(ctx, rec.PID); err != nil {
				return fmt.Errorf("process: leftover server group %d: %w", rec.PID, err)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("process: removing leftover %s: %w", dir, err)
	}
	return nil
}

// ours reports whether the process group of rec still holds a process of
// the recorded trial. With the leader alive, its start time must match (its
// PID may have been reused). With the leader gone, any process still in the
// group is ours: the kernel does not hand out a PID that is still some
// group's ID, so no newer group can carry this number.
func (r *Runtime) ours(rec record) bool {
	if rec.PID <= 1 {
		return false
	}
	if ticks, ok := startTicks(rec.PID); ok && !zombie(rec.PID) {
		return ticks == rec.StartTicks
	}
	return len(groupMembers(rec.PID)) > 0
}

// waitGroupGone waits until no live process is in group pgid (zombies count
// as gone: their parent, not us, must reap them).
func waitGroupGone(ctx context.Context, pgid int) error {
	deadline := time.Now().Add(killWait)
	for len(groupMembers(pgid)) > 0 {
		if time.Now().After(deadline) {
			return errors.New("still running after SIGKILL")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// groupMembers lists the live processes whose process group is pgid.
func groupMembers(pgid int) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	want := strconv.Itoa(pgid)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		f := statFields(pid)
		if len(f) > 2 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// statFields returns the fields of /proc/pid/stat after the command name.
func statFields(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}

func startTicks(pid int) (uint64, bool) {
	f := statFields(pid)
	if len(f) < 20 {
		return 0, false
	}
	t, err := strconv.ParseUint(f[19], 10, 64) // field 22: starttime
	return t, err == nil
}

func zombie(pid int) bool {
	f := statFields(pid)
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// Start stops the previous server and starts the binary with the trial's
// flags after the study's: --port, --rest_api_port, --model_name,
// --model_base_path, Options.Args, then cfg.Args with the files written to a
// fresh trial directory, which is also the server's working directory.
func (r *Runtime) Start(ctx context.Context, cfg runtime.Config) (runtime.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("process: config: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lock == nil {
		return nil, runtime.ErrNotRecovered
	}
	if r.cur != nil {
		err := r.cur.Stop(ctx)
		r.cur = nil
		if err != nil {
			return nil, fmt.Errorf("process: stopping the previous server: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("process: start: %w", err)
	}
	grpcPort, restPort, err := r.ports()
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	r.seq++
	dir := filepath.Join(r.dir, "trial-"+strconv.Itoa(r.seq))
	bf, mf, err := statedir.TrialFiles(dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	args := []string{"--port=" + strconv.Itoa(grpcPort), "--rest_api_port=" + strconv.Itoa(restPort)}
	if r.opts.ModelName != "" {
		args = append(args, "--model_name="+r.opts.ModelName)
	}
	if r.opts.ModelBasePath != "" {
		args = append(args, "--model_base_path="+r.opts.ModelBasePath)
	}
	args = append(args, r.opts.Args...)
	args = append(args, cfg.Args(bf, mf)...)

	ring := logtail.New(r.opts.LogBytes)
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), r.opts.Env...)
	cmd.Stdout, cmd.Stderr = ring, ring
	// Its own group, so Stop reaches anything it forks; SIGKILL when
	// batchtune dies, so a killed tuner leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A grandchild holding the output pipe must not keep Wait forever.
	cmd.WaitDelay = time.Second

	s := &server{
		rt:  r,
		ep:  runtime.Endpoints{GRPC: joinHostPort(r.opts.Host, grpcPort), REST: joinHostPort(r.opts.Host, restPort)},
		dir: dir,
		l:   latch.New(),
	}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits, not
		// the process: keep that thread, locked to this goroutine, alive
		// until the child is reaped.
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		werr := cmd.Wait()
		s.ended(cmd, werr, ring)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("process: starting %s: %w", r.bin, err)
	}
	s.pid = cmd.Process.Pid
	ticks, _ := startTicks(s.pid)
	rec, _ := json.Marshal(record{PID: s.pid, StartTicks: ticks, Binary: r.bin})
	if err := atomicfile.Write(filepath.Join(dir, recordFile), rec, 0o644); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("process: recording the server's pid: %w", err)
	}
	r.cur = s
	r.log.Info("trial server started", "pid", s.pid, "grpc", s.ep.GRPC, "rest", s.ep.REST, "dir", dir)
	return s, nil
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// ports returns the fixed ports after checking they are free, or free ones.
func (r *Runtime) ports() (grpcPort, restPort int, err error) {
	grpcPort, restPort = r.opts.GRPCPort, r.opts.RESTPort
	if grpcPort != 0 {
		if err := ports.Check("", grpcPort, "gRPC"); err != nil {
			return 0, 0, err
		}
	}
	if restPort != 0 {
		if err := ports.Check("", restPort, "REST"); err != nil {
			return 0, 0, err
		}
	}
	if grpcPort != 0 && restPort != 0 {
		return grpcPort, restPort, nil
	}
	free, err := ports.Free("", 2)
	if err != nil {
		return 0, 0, err
	}
	// Skip a free port that equals the other, fixed one.
	pick := func(i int, other int) int {
		if free[i] == other {
			return free[1-i]
		}
		return free[i]
	}
	if grpcPort == 0 {
		grpcPort = pick(0, restPort)
	}
	if restPort == 0 {
		restPort = pick(1, grpcPort)
	}
	return grpcPort, restPort, nil
}

// Restore stops the trial server, removes every trial directory and
// releases the study. It is idempotent; a cancelled ctx still kills the
// server (SIGKILL) before it returns.
func (r *Runtime) Restore(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if r.cur != nil {
		if err := r.cur.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("process: restore: %w", err))
		}
		r.cur = nil
	}
	if r.lock != nil {
		dirs, err := statedir.TrialDirs(r.dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("process: restore: %w", err))
		}
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, fmt.Errorf("process: restore: %w", err))
			}
		}
		if err := r.lock.Release(); err != nil {
			errs = append(errs, fmt.Errorf("process: restore: %w", err))
		}
		r.lock = nil
	}
	return errors.Join(errs...)
}

// server is one child process.
type server struct {
	rt       *Runtime
	ep       runtime.Endpoints
	dir      string
	pid      int // also its process group
	l        *latch.Latch
	stopping atomic.Bool
	cleanup  sync.Once
}

var _ runtime.Server = (*server)(nil)

func (s *server) Endpoints() runtime.Endpoints { return s.ep }
func (s *server) Done() <-chan struct{}        { return s.l.Done() }
func (s *server) Exit() runtime.Exit           { return s.l.Exit() }

// ended records how the process ended; it runs once, after Wait.
func (s *server) ended(cmd *exec.Cmd, werr error, ring *logtail.Ring) {
	e := runtime.Exit{Code: -1}
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
			e = runtime.ExitFromStatus(ws)
		}
	}
	if werr != nil && !errors.As(werr, new(*exec.ExitError)) {
		e.Detail = werr.Error()
	}
	// Whatever it forked dies with it: ports held by a straggler would
	// fail the next trial.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	e.Stopped = s.stopping.Load()
	e.Log = ring.Tail(s.rt.opts.TailLines)
	e.At = time.Now()
	s.l.Finish(e)
	s.rt.log.Info("trial server ended", "pid", cmd.Process.Pid, "reason", e.Reason())
}

// Stop sends SIGTERM to the server's group, SIGKILL after the grace period
// (at once when ctx ends), waits for it to be reaped and removes its trial
// directory.
func (s *server) Stop(ctx context.Context) error {
	var err error
	if !s.l.Ended() {
		s.stopping.Store(true)
		syscall.Kill(-s.pid, syscall.SIGTERM)
		grace := time.NewTimer(s.rt.opts.StopGrace)
		defer grace.Stop()
		select {
		case <-s.l.Done():
		case <-grace.C:
			s.rt.log.Warn("trial server ignored SIGTERM; sending SIGKILL", "pid", s.pid, "grace", s.rt.opts.StopGrace)
			err = s.kill()
		case <-ctx.Done():
			err = errors.Join(ctx.Err(), s.kill())
		}
	}
	s.cleanup.Do(func() {
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	})
	if err != nil {
		return fmt.Errorf("process: stopping pid %d: %w", s.pid, err)
	}
	return nil
}

func (s *server) kill() error {
	syscall.Kill(-s.pid, syscall.SIGKILL)
	select {
	case <-s.l.Done():
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("not reaped %v after SIGKILL", killWait)
	}
}

// PID returns the process ID (and process group) of a server this package
// started, for diagnostics and for tests that kill it from outside.
func PID(s runtime.Server) (int, bool) {
	ps, ok := s.(*server)
	if !ok {
		return 0, false
	}
	return ps.pid, true
}
