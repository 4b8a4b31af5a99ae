package runtimetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/batchtune/batchtune/tfserving"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Harness describes one runtime, and the server it runs, to the suite.
type Harness struct {
	// New builds a runtime whose state lives in stateDir. Two runtimes
	// built on the same stateDir are the same study.
	New func(t *testing.T, stateDir string) runtime.Runtime
	// Leftovers lists what runtimes on stateDir still have running or on
	// disk (processes, containers, trial files), one string each.
	Leftovers func(t *testing.T, stateDir string) []string
	// Kill ends a running server from outside, as the OOM killer would.
	Kill func(t *testing.T, s runtime.Server)

	// Model is the model name the server serves.
	Model string
	// Good is a batching.config the server accepts.
	Good []byte
	// Rejected is a batching.config the server refuses at load, and
	// RejectedLog a piece of what it then says in its log.
	Rejected    []byte
	RejectedLog string

	// CrashFlags, when set, are trial flags that make the server die on
	// its own after it answers, with exit code CrashCode and CrashLog in
	// its log.
	CrashFlags []string
	CrashCode  int
	CrashLog   string
	// IgnoreTermFlags, when set, make the server ignore SIGTERM, so that
	// Stop must escalate to SIGKILL after the runtime's grace period.
	IgnoreTermFlags []string
	// SlowLoadFlags, when set, keep the server from answering for a while
	// after it starts (a long model load).
	SlowLoadFlags []string

	// Check, when set, asserts that the started server runs with cfg (its
	// batching.config and flags), by asking the server.
	Check func(t *testing.T, s runtime.Server, cfg runtime.Config)

	// Ready bounds how long a server may take to answer; default 60s. It
	// is a watchdog, not a measurement.
	Ready time.Duration
}

// hang is the watchdog for calls that must return promptly.
const hang = 60 * time.Second

// Run runs the conformance suite over the runtime h describes.
func Run(t *testing.T, h Harness) {
	if h.Ready == 0 {
		h.Ready = 60 * time.Second
	}
	s := &suite{h: h}
	t.Run("StartBeforeRecover", s.startBeforeRecover)
	t.Run("StartAnswers", s.startAnswers)
	t.Run("RejectedConfigFailsFast", s.rejected)
	if len(h.CrashFlags) > 0 {
		t.Run("CrashReported", s.crash)
	}
	t.Run("KillReported", s.kill)
	t.Run("RestartStopsPrevious", s.restart)
	t.Run("StopIdempotent", s.stopIdempotent)
	if len(h.IgnoreTermFlags) > 0 {
		t.Run("StopEscalatesToKill", s.stopEscalates)
	}
	t.Run("RestoreLeavesNothing", s.restoreLeavesNothing)
	t.Run("SecondRuntimeBusy", s.busy)
	t.Run("CancelNeverHangs", s.cancel)
}

type suite struct{ h Harness }

// fresh returns a recovered runtime on a new state dir, restored (with a
// fresh context) and checked for leftovers when the test ends.
func (s *suite) fresh(t *testing.T) (runtime.Runtime, string) {
	t.Helper()
	dir := t.TempDir()
	rt := s.h.New(t, dir)
	within(t, "Recover", func() {
		if err := rt.Recover(context.Background()); err != nil {
			t.Fatalf("Recover: %v", err)
		}
	})
	t.Cleanup(func() {
		within(t, "Restore", func() {
			if err := rt.Restore(context.Background()); err != nil {
				t.Errorf("Restore: %v", err)
			}
		})
		if left := s.h.Leftovers(t, dir); len(left) > 0 {
			t.Errorf("left behind after Restore: %q", left)
		}
	})
	return rt, dir
}

func (s *suite) start(t *testing.T, rt runtime.Runtime, cfg runtime.Config) runtime.Server {
	t.Helper()
	var srv runtime.Server
	within(t, "Start", func() {
		var err error
		srv, err = rt.Start(context.Background(), cfg)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	})
	return srv
}

func (s *suite) waitPorts(t *testing.T, srv runtime.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Ready)
	defer cancel()
	if err := runtime.WaitPorts(ctx, srv); err != nil {
		t.Fatalf("WaitPorts: %v\nlog:\n%s", err, srv.Exit().Log)
	}
}

// within fails the test when f does not return within the watchdog.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hang):
		t.Fatalf("%s did not return within %v", what, hang)
	}
}

func waitDone(t *testing.T, srv runtime.Server, what string) runtime.Exit {
	t.Helper()
	select {
	case <-srv.Done():
		return srv.Exit()
	case <-time.After(hang):
		t.Fatalf("%s: Done not closed within %v", what, hang)
	}
	return runtime.Exit{}
}

func (s *suite) startBeforeRecover(t *testing.T) {
	rt := s.h.New(t, t.TempDir())
	_, err := rt.Start(context.Background(), runtime.Config{Batching: s.h.Good})
	if !errors.Is(err, runtime.ErrNotRecovered) {
		t.Fatalf("Start before Recover: got %v, want ErrNotRecovered", err)
	}
	if err := rt.Restore(context.Background()); err != nil {
		t.Fatalf("Restore of a runtime never started: %v", err)
	}
}

func (s *suite) startAnswers(t *testing.T) {
	rt, _ := s.fresh(t)
	cfg := runtime.Config{Batching: s.h.Good, IntraOpParallelism: 2, InterOpParallelism: 1}
	srv := s.start(t, rt, cfg)
	s.waitPorts(t, srv)
	ep := srv.Endpoints()

	// gRPC: the model is AVAILABLE.
	conn, err := grpc.NewClient("passthrough:///"+ep.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := tfserving.NewModelServiceClient(conn).GetModelStatus(ctx, &tfserving.GetModelStatusRequest{
		ModelSpec: &tfserving.ModelSpec{Name: s.h.Model},
	})
	if err != nil {
		t.Fatalf("GetModelStatus(%q) at %s: %v", s.h.Model, ep.GRPC, err)
	}
	if vs := st.GetModelVersionStatus(); len(vs) == 0 || vs[0].GetState() != tfserving.ModelVersionStatus_AVAILABLE {
		t.Fatalf("GetModelStatus: got %v, want a version AVAILABLE", vs)
	}

	// REST: the model status, and the Prometheus path the monitoring
	// config enables.
	body := httpGet(t, "http://"+ep.REST+"/v1/models/"+s.h.Model)
	if !strings.Contains(body, `"AVAILABLE"`) {
		t.Fatalf("GET /v1/models/%s: %s", s.h.Model, body)
	}
	metrics := httpGet(t, ep.MetricsURL())
	if !strings.Contains(metrics, ":tensorflow:serving:") {
		t.Fatalf("GET %s: no TF Serving metric in:\n%s", ep.MetricsURL(), metrics)
	}
	if s.h.Check != nil {
		s.h.Check(t, srv, cfg)
	}
	select {
	case <-srv.Done():
		t.Fatalf("Done closed while the server runs: %v", srv.Exit().Reason())
	default:
	}
	if (srv.Exit() != runtime.Exit{}) {
		t.Fatalf("Exit before the end: got %+v, want the zero Exit", srv.Exit())
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

func (s *suite) rejected(t *testing.T) {
	rt, _ := s.fresh(t)
	began := time.Now()
	srv := s.start(t, rt, runtime.Config{Batching: s.h.Rejected})
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Ready)
	defer cancel()
	err := runtime.WaitPorts(ctx, srv)
	var ee *runtime.ExitError
	if !errors.As(err, &ee) || !errors.Is(err, runtime.ErrExited) {
		t.Fatalf("WaitPorts with a rejected config: got %v, want an *ExitError (endpoints %+v)", err, srv.Endpoints())
	}
	took := time.Since(began)
	t.Logf("rejected config reported after %v: %s", took.Round(time.Millisecond), ee.Exit.Reason())
	e := ee.Exit
	if e.Code == 0 || e.Stopped {
		t.Errorf("Exit: got code %d stopped %v, want a non-zero code, not stopped", e.Code, e.Stopped)
	}
	if !strings.Contains(e.Log, s.h.RejectedLog) {
		t.Errorf("Exit.Log does not contain %q:\n%s", s.h.RejectedLog, e.Log)
	}
	if !strings.Contains(ee.Error(), runtime.LastLine(e.Log)) {
		t.Errorf("error %q does not carry the log's last line %q", ee.Error(), runtime.LastLine(e.Log))
	}
	// TF's default, 5 load retries 60 s apart, would take 5 minutes;
	// --max_num_load_retries=0 must make it far quicker than that.
	if took > s.h.Ready {
		t.Errorf("rejection took %v", took)
	}
	if got := srv.Exit(); got.Code != e.Code || got.Log != e.Log {
		t.Errorf("Exit changed after Done: %+v then %+v", e, got)
	}
}

func (s *suite) crash(t *testing.T) {
	rt, _ := s.fresh(t)
	srv := s.start(t, rt, runtime.Config{Batching: s.h.Good, Flags: s.h.CrashFlags})
	s.waitPorts(t, srv)
	e := waitDone(t, srv, "crash")
	if e.Code != s.h.CrashCode || e.Stopped || e.Signal != "" {
		t.Errorf("Exit: got code %d signal %q stopped %v, want code %d, no signal, not stopped", e.Code, e.Signal, e.Stopped, s.h.CrashCode)
	}
	if !strings.Contains(e.Log, s.h.CrashLog) {
		t.Errorf("Exit.Log does not contain %q:\n%s", s.h.CrashLog, e.Log)
	}
	if !strings.Contains(e.Reason(), s.h.CrashLog) {
		t.Errorf("Reason %q does not say %q", e.Reason(), s.h.CrashLog)
	}
	within(t, "Stop after a crash", func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("Stop after a crash: %v", err)
		}
	})
	if got := srv.Exit(); got.Stopped {
		t.Errorf("Stop after a crash rewrote Exit: %+v", got)
	}
}

func (s *suite) kill(t *testing.T) {
	rt, _ := s.fresh(t)
	srv := s.start(t, rt, runtime.Config{Batching: s.h.Good})
	s.waitPorts(t, srv)
	s.h.Kill(t, srv)
	e := waitDone(t, srv, "kill")
	if e.Code != 137 || e.Signal != "killed" || e.Stopped {
		t.Errorf("Exit: got code %d signal %q stopped %v, want 137 \"killed\", not stopped", e.Code, e.Signal, e.Stopped)
	}
	if !strings.Contains(e.Reason(), "killed") {
		t.Errorf("Reason %q does not say it was killed", e.Reason())
	}
}

func (s *suite) restart(t *testing.T) {
	rt, _ := s.fresh(t)
	first := s.start(t, rt, runtime.Config{Batching: s.h.Good})
	s.waitPorts(t, first)
	second := s.start(t, rt, runtime.Config{Batching: s.h.Good, IntraOpParallelism: 1})
	select {
	case <-first.Done():
	default:
		t.Fatal("the first server still runs after the second Start")
	}
	if e := first.Exit(); !e.Stopped {
		t.Errorf("first server's Exit: got %+v, want Stopped", e)
	}
	s.waitPorts(t, second)
	if s.h.Check != nil {
		s.h.Check(t, second, runtime.Config{Batching: s.h.Good, IntraOpParallelism: 1})
	}
}

func (s *suite) stopIdempotent(t *testing.T) {
	rt, _ := s.fresh(t)
	srv := s.start(t, rt, runtime.Config{Batching: s.h.Good})
	s.waitPorts(t, srv)
	for i := range 3 {
		within(t, "Stop", func() {
			if err := srv.Stop(context.Background()); err != nil {
				t.Fatalf("Stop #%d: %v", i+1, err)
			}
		})
	}
	e := waitDone(t, srv, "stop")
	if !e.Stopped {
		t.Errorf("Exit after Stop: got %+v, want Stopped", e)
	}
	if !strings.Contains(e.Reason(), "stopped by batchtune") {
		t.Errorf("Reason %q", e.Reason())
	}
	for i := range 2 {
		within(t, "Restore", func() {
			if err := rt.Restore(context.Background()); err != nil {
				t.Fatalf("Restore #%d: %v", i+1, err)
			}
		})
	}
}

func (s *suite) stopEscalates(t *testing.T) {
	rt, _ := s.fresh(t)
	srv := s.start(t, rt, runtime.Config{Batching: s.h.Good, Flags: s.h.IgnoreTermFlags})
	s.waitPorts(t, srv)
	within(t, "Stop", func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	})
	e := waitDone(t, srv, "stop")
	if !e.Stopped || e.Code != 137 {
		t.Errorf("Exit of a server that ignores SIGTERM: got %+v, want Stopped with code 137", e)
	}
}

func (s *suite) restoreLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	rt := s.h.New(t, dir)
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	var srvs []runtime.Server
	for range 2 {
		srv := s.start(t, rt, runtime.Config{Batching: s.h.Good})
		s.waitPorts(t, srv)
		srvs = append(srvs, srv)
	}
	if left := s.h.Leftovers(t, dir); len(left) == 0 {
		t.Fatal("Leftovers sees nothing while a server runs: the check cannot fail")
	}
	within(t, "Restore", func() {
		if err := rt.Restore(ctx); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	})
	for i, srv := range srvs {
		select {
		case <-srv.Done():
		default:
			t.Errorf("server %d still running after Restore", i)
		}
	}
	if left := s.h.Leftovers(t, dir); len(left) > 0 {
		t.Errorf("left behind after Restore: %q", left)
	}
	if _, err := rt.Start(ctx, runtime.Config{Batching: s.h.Good}); !errors.Is(err, runtime.ErrNotRecovered) {
		t.Errorf("Start after Restore: got %v, want ErrNotRecovered", err)
	}
}

func (s *suite) busy(t *testing.T) {
	_, dir := s.fresh(t)
	other := s.h.New(t, dir)
	err := other.Recover(context.Background())
	if !errors.Is(err, runtime.ErrBusy) {
		t.Fatalf("Recover of a second runtime on a held study: got %v, want ErrBusy", err)
	}
}

func (s *suite) cancel(t *testing.T) {
	t.Run("StartWithCancelledContext", func(t *testing.T) {
		rt, dir := s.fresh(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		within(t, "Start", func() {
			if _, err := rt.Start(ctx, runtime.Config{Batching: s.h.Good}); !errors.Is(err, context.Canceled) {
				t.Errorf("Start with a cancelled context: got %v, want context.Canceled", err)
			}
		})
		if left := s.h.Leftovers(t, dir); len(left) > 0 {
			t.Errorf("Start with a cancelled context left %q", left)
		}
	})
	t.Run("WaitPortsCancelled", func(t *testing.T) {
		rt, _ := s.fresh(t)
		srv := s.start(t, rt, runtime.Config{Batching: s.h.Good, Flags: s.h.SlowLoadFlags})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		within(t, "WaitPorts", func() {
			err := runtime.WaitPorts(ctx, srv)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("WaitPorts with a cancelled context: got %v, want context.Canceled", err)
			}
		})
	})
	t.Run("StopCancelled", func(t *testing.T) {
		rt, _ := s.fresh(t)
		flags := s.h.IgnoreTermFlags // the worst case: SIGTERM alone would not end it
		srv := s.start(t, rt, runtime.Config{Batching: s.h.Good, Flags: flags})
		s.waitPorts(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		within(t, "Stop", func() {
			// The error may be nil when the server ended at once.
			if err := srv.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Stop with a cancelled context: %v", err)
			}
		})
		waitDone(t, srv, "Stop with a cancelled context")
	})
	t.Run("RestoreAfterCancel", func(t *testing.T) {
		dir := t.TempDir()
		rt := s.h.New(t, dir)
		ctx, cancel := context.WithCancel(context.Background())
		if err := rt.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		srv := s.start(t, rt, runtime.Config{Batching: s.h.Good})
		s.waitPorts(t, srv)
		cancel() // the tuner's Ctrl-C
		within(t, "Restore", func() {
			if err := rt.Restore(context.Background()); err != nil {
				t.Fatalf("Restore with a fresh context: %v", err)
			}
		})
		waitDone(t, srv, "Restore")
		if left := s.h.Leftovers(t, dir); len(left) > 0 {
			t.Errorf("left behind: %q", left)
		}
	})
}
