package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/tfserving"
)

// Tests against the TF Serving stand-in (cmd/tfs-emulator) run as a
// subprocess with a bundled model, the way the tuner runs a server. They
// build the binary, so they are skipped with -short.

func standInBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the stand-in; run without -short")
	}
	return emulatortest.Emulator(t)
}

type standIn struct {
	target Target
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	log    *bytes.Buffer
}

// startStandIn runs the stand-in with the bundled model and batching, on
// free ports, until the test ends.
func startStandIn(t *testing.T, model string, extra ...string) *standIn {
	t.Helper()
	bin := standInBinary(t)
	dir := t.TempDir()
	batching := filepath.Join(dir, "batching.config")
	monitoring := filepath.Join(dir, "monitoring.config")
	os.WriteFile(batching, []byte("max_batch_size { value: 32 }\nbatch_timeout_micros { value: 1000 }\nmax_enqueued_batches { value: 100 }\nnum_batch_threads { value: 2 }\n"), 0o644)
	os.WriteFile(monitoring, []byte("prometheus_config {\n  enable: true\n  path: \"/monitoring/prometheus/metrics\"\n}\n"), 0o644)
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	g, r := port(), port()
	args := append([]string{fmt.Sprintf("--port=%d", g), fmt.Sprintf("--rest_api_port=%d", r), "--model_name=" + model,
		"--model_base_path=" + filepath.Join("..", "configs", "models", model), "--enable_batching",
		"--batching_parameters_file=" + batching, "--monitoring_config_file=" + monitoring, "--max_num_load_retries=0"}, extra...)
	s := &standIn{
		target: Target{Addr: fmt.Sprintf("127.0.0.1:%d", g), RESTAddr: fmt.Sprintf("127.0.0.1:%d", r), Model: model},
		cmd:    exec.Command(bin, args...),
		exited: make(chan struct{}),
		log:    new(bytes.Buffer),
	}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("stand-in log:\n%s", s.log)
		}
	})
	return s
}

// ctxUntilExit is the tuner's pattern: a context cancelled, with a cause,
// when the server process dies.
func (s *standIn) ctxUntilExit(t *testing.T) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	go func() {
		select {
		case <-s.exited:
			cancel(fmt.Errorf("stand-in exited: %v", s.cmd.ProcessState))
		case <-ctx.Done():
		}
	}()
	return ctx
}

func TestStandIn(t *testing.T) {
	s := startStandIn(t, "ranker")
	ctx := s.ctxUntilExit(t)
	start := time.Now()
	if err := WaitReady(ctx, s.target, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("ready after %s (the model loads in 1.5 s)", time.Since(start).Round(time.Millisecond))

	t.Run("unknown model", func(t *testing.T) {
		bad := s.target
		bad.Model = "nosuchmodel"
		start := time.Now()
		err := WaitReady(ctx, bad, 10*time.Second, nil)
		if !errors.Is(err, ErrModelNotFound) || time.Since(start) > 2*time.Second {
			t.Errorf("err = %v after %s, want model-not-found at once", err, time.Since(start))
		}
		if err := WaitReady(ctx, bad, 10*time.Second, &ReadyOptions{REST: true}); !errors.Is(err, ErrModelNotFound) {
			t.Errorf("REST: err = %v", err)
		}
	})

	// No payload given: the inputs come from the model's signature.
	c, err := New(ctx, s.target, &Options{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := shapeOf(c.Requests()[0].GetInputs()["features"]); len(got) != 2 || got[0] != 2 || got[1] != 256 {
		t.Fatalf("discovered payload shape %v, want [2 256]", got)
	}

	t.Run("warmup and closed loop", func(t *testing.T) {
		w, err := c.Warmup(ctx, Load{Concurrency: 16}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("warmup: %+v", w)
		r, err := c.Measure(ctx, Load{Concurrency: 16}, &MeasureOptions{MinDuration: 3 * time.Second, MaxDuration: 8 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + Summary(r))
		// The server's own count of this run equals the probe's.
		if r.Server.Error != "" || r.Server.RequestCount["OK"] != float64(r.OK) || len(r.Errors) != 0 {
			t.Errorf("server counted %v, probe %d ok, errors %v (%s)", r.Server.RequestCount, r.OK, r.Errors, r.Server.Error)
		}
		// 16 in flight against max_batch_size 32 do batch; queuing is part
		// of server latency.
		if r.Server.MeanBatchSize <= 1.5 || !(r.Server.QueuingShare > 0 && r.Server.QueuingShare < 1) {
			t.Errorf("mean batch %.2f, queuing share %.2f", r.Server.MeanBatchSize, r.Server.QueuingShare)
		}
		if r.QPS <= 0 || r.Latency.P99 < r.Latency.P50 || r.Latency.Count != r.OK {
			t.Errorf("figures: %+v", r.Latency)
		}
	})

	t.Run("open loop", func(t *testing.T) {
		o := fixed(3 * time.Second)
		o.MaxPacingLag = time.Second // this test is about the rate, not the shared machine's wake-ups
		r, err := c.Measure(ctx, Load{Rate: 200}, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + Summary(r))
		if r.SentRate < 190 || r.SentRate > 210 || r.Server.RequestCount["OK"] != float64(r.OK) {
			t.Errorf("sent %.1f/s of 200, server counted %v of %d", r.SentRate, r.Server.RequestCount, r.OK)
		}
	})

	t.Run("certain SLO breach", func(t *testing.T) {
		r, err := c.Measure(ctx, Load{Concurrency: 8}, &MeasureOptions{MinDuration: 10 * time.Second, MaxDuration: 30 * time.Second,
			SLO: &SLO{Latency: 50 * time.Microsecond, ErrorRate: 0.01}})
		if err != nil {
			t.Fatal(err)
		}
		if r.StopReason != StopSLOBreach || r.Duration > 3*time.Second {
			t.Errorf("stop %q after %s: %s", r.StopReason, r.Duration, r.StopDetail)
		}
	})

	t.Run("rest", func(t *testing.T) {
		rc, err := New(ctx, s.target, &Options{Transport: REST, Requests: c.Requests()})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if err := rc.Check(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := rc.Measure(ctx, Load{Concurrency: 4}, fixed(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if r.OK == 0 || len(r.Errors) != 0 || r.Server.RequestCount["OK"] != float64(r.OK) {
			t.Errorf("REST: ok %d errors %v, server %v", r.OK, r.Errors, r.Server.RequestCount)
		}
	})

	t.Run("warmup file payload", func(t *testing.T) {
		var reqs []*tfserving.PredictRequest
		for b := 1; b <= 3; b++ {
			req, err := GenerateRequest([]InputSpec{{Name: "features", DType: "DT_FLOAT", Shape: []int64{-1, 256}}}, b, uint64(b))
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, req)
		}
		path := filepath.Join(t.TempDir(), "tf_serving_warmup_requests")
		var buf bytes.Buffer
		if err := WriteWarmupFile(&buf, reqs); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(path, buf.Bytes(), 0o644)
		got, err := ReadWarmupFile(path)
		if err != nil {
			t.Fatal(err)
		}
		wc, err := New(ctx, s.target, &Options{Requests: got})
		if err != nil {
			t.Fatal(err)
		}
		defer wc.Close()
		r, err := wc.Measure(ctx, Load{Concurrency: 3}, fixed(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// Rows sent = 1+2+3 per round of three requests: the server's
		// batches hold them, so its processed rows exceed its requests.
		if r.OK == 0 || len(r.Errors) != 0 {
			t.Errorf("warmup-file payload: ok %d errors %v", r.OK, r.Errors)
		}
	})

	t.Run("bad payload", func(t *testing.T) {
		bc, err := New(ctx, s.target, &Options{Inputs: []InputSpec{{Name: "wrong", DType: "float", Shape: []int64{-1, 256}}}})
		if err != nil {
			t.Fatal(err)
		}
		defer bc.Close()
		_, err = bc.Warmup(ctx, Load{Concurrency: 1}, nil)
		if !errors.Is(err, ErrRequestsFail) || !strings.Contains(err.Error(), "InvalidArgument") {
			t.Errorf("err = %v, want the server's InvalidArgument", err)
		}
	})
}

// The tuner cancels its context when the server process dies; waiting and
// measuring then end at once with that cause.
func TestStandInDies(t *testing.T) {
	s := startStandIn(t, "ranker")
	ctx := s.ctxUntilExit(t)
	// Kill it while it is still loading (the ranker loads for 1.5 s).
	time.AfterFunc(300*time.Millisecond, func() { s.cmd.Process.Kill() })
	start := time.Now()
	err := WaitReady(ctx, s.target, time.Minute, nil)
	if err == nil || !strings.Contains(err.Error(), "stand-in exited") || time.Since(start) > 2*time.Second {
		t.Fatalf("WaitReady: err = %v after %s", err, time.Since(start))
	}

	s2 := startStandIn(t, "ranker")
	ctx2 := s2.ctxUntilExit(t)
	if err := WaitReady(ctx2, s2.target, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	c, err := New(ctx2, s2.target, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(time.Second, func() { s2.cmd.Process.Kill() })
	start = time.Now()
	r, err := c.Measure(ctx2, Load{Concurrency: 8}, fixed(30*time.Second))
	if err == nil || !strings.Contains(err.Error(), "stand-in exited") || time.Since(start) > 4*time.Second {
		t.Fatalf("Measure: err = %v after %s", err, time.Since(start))
	}
	if r == nil || r.Valid || r.StopReason != StopCancelled || r.OK == 0 {
		t.Errorf("partial result %+v", r)
	}
}

// A stand-in that cannot start (a batching config whose batch does not fit
// device memory) exits; WaitReady says so through the cause, at once.
func TestStandInFailsToStart(t *testing.T) {
	dir := t.TempDir()
	batching := filepath.Join(dir, "b.config")
	os.WriteFile(batching, []byte("max_batch_size { value: 100000 }\n"), 0o644)
	bad := startStandIn(t, "ranker", "--batching_parameters_file="+batching)
	ctx := bad.ctxUntilExit(t)
	start := time.Now()
	err := WaitReady(ctx, bad.target, time.Minute, nil)
	if err == nil || !strings.Contains(err.Error(), "stand-in exited") || time.Since(start) > 10*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
	if !strings.Contains(bad.log.String(), "Failed to start server") {
		t.Errorf("stand-in log does not say why:\n%s", bad.log)
	}
}

func TestMain(m *testing.M) { emulatortest.Main(m) }
