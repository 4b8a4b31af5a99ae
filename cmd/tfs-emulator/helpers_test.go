package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/batchtune/batchtune/emulator/warmup"
	"github.com/batchtune/batchtune/tfserving"
)

// The test binary doubles as the stand-in: with this variable set it runs
// main's run() on its arguments instead of the tests, so every test below
// talks to a real tfs-emulator process over real sockets.
const beMain = "TFS_EMULATOR_TEST_BE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(beMain) == "1" {
		os.Exit(run(append([]string{"tfs-emulator"}, os.Args[1:]...), os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// accel is a test accelerator model description: 4 features, 1 output.
type accel struct {
	launchUS, itemUS float64
	coldRuns         int
	coldFactor       float64
	memoryMiB        float64
	loadMS           float64
}

func (a accel) json() string {
	if a.memoryMiB == 0 {
		a.memoryMiB = 4096
	}
	return fmt.Sprintf(`{
  "signatures": {
    "serving_default": {
      "inputs": {"x": {"dtype": "DT_FLOAT", "shape": [-1, 4]}},
      "outputs": {"score": {"dtype": "DT_FLOAT", "shape": [-1, 1]}}
    }
  },
  "load_time_ms": %g,
  "device": "accelerator",
  "accelerator": {"launch_us": %g, "item_us": %g, "memory_mib": %g, "activation_kib_per_item": 1024,
                  "cold_runs": %d, "cold_factor": %g}
}`, a.loadMS, a.launchUS, max(a.itemUS, 1), a.memoryMiB, a.coldRuns, max(a.coldFactor, 1))
}

// modelDir writes BASE/1/model.json and returns BASE.
func modelDir(t *testing.T, desc string) string {
	t.Helper()
	base := filepath.Join(t.TempDir(), "m")
	writeAt(t, filepath.Join(base, "1", "model.json"), desc)
	return base
}

func writeAt(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func tempFile(t *testing.T, name, content string) string {
	return writeAt(t, filepath.Join(t.TempDir(), name), content)
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) int { return freePorts(t, 1)[0] }

// freePorts returns n distinct ports that were free a moment ago (held
// open together so that they differ).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// proc is a tfs-emulator process.
type proc struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	grpc   int
	rest   int
	conn   *grpc.ClientConn
	client tfserving.PredictionServiceClient
	status tfserving.ModelServiceClient
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// command returns the stand-in process for args (and extra environment).
func command(args []string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), beMain+"=1"), env...)
	return cmd
}

// runToExit runs the stand-in to completion and returns its exit code and
// its combined output.
func runToExit(t *testing.T, args []string, env ...string) (int, string) {
	t.Helper()
	cmd := command(args, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("stand-in %v did not exit within 60s; output:\n%s", args, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// launch starts a stand-in on free ports serving model "m" from base with
// monitoring on, plus extra flags, and waits until it answers.
func launch(t *testing.T, base string, extra ...string) *proc {
	t.Helper()
	ports := freePorts(t, 2)
	p := &proc{grpc: ports[0], rest: ports[1], out: &syncBuffer{}, done: make(chan error, 1)}
	mon := tempFile(t, "monitoring.config", `prometheus_config { enable: true, path: "/monitoring/prometheus/metrics" }`)
	args := append([]string{
		"--port=" + strconv.Itoa(p.grpc), "--rest_api_port=" + strconv.Itoa(p.rest),
		"--model_name=m", "--model_base_path=" + base, "--monitoring_config_file=" + mon,
		"--max_num_load_retries=0",
	}, extra...)
	p.cmd = command(args)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(p.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.conn = conn
	p.client = tfserving.NewPredictionServiceClient(conn)
	p.status = tfserving.NewModelServiceClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := p.status.GetModelStatus(ctx, &tfserving.GetModelStatusRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"}})
		cancel()
		if err == nil && st.GetModelVersionStatus()[0].GetState() == tfserving.ModelVersionStatus_AVAILABLE {
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("stand-in exited (%v) before answering:\n%s", err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("stand-in did not answer within 30s:\n%s", p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM (a graceful stop) and waits for the exit.
func (p *proc) stop(t *testing.T) {
	if p.conn != nil {
		p.conn.Close()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("stand-in exit after SIGTERM: %v\n%s", err, p.out.String())
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("stand-in did not stop within 20s of SIGTERM")
	}
}

// predict sends one request of rows × 4 features.
func (p *proc) predict(ctx context.Context, rows int) (*tfserving.PredictResponse, error) {
	vals := make([]float32, rows*4)
	for i := range vals {
		vals[i] = float32(i) / 10
	}
	return p.client.Predict(ctx, &tfserving.PredictRequest{
		ModelSpec: &tfserving.ModelSpec{Name: "m"},
		Inputs: map[string]*tfserving.TensorProto{"x": {
			Dtype:       tfserving.DataType_DT_FLOAT,
			TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: int64(rows)}, {Size: 4}}},
			FloatVal:    vals,
		}},
	})
}

// scrape parses the stand-in's metrics with expfmt.
func (p *proc) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(p.rest) + "/monitoring/prometheus/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing metrics: %v\n%s", err, body)
	}
	return fams
}

// find returns the sample of a family whose labels include want (nil: any).
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
next:
	for _, m := range fams[name].GetMetric() {
		for k, v := range want {
			ok := false
			for _, lp := range m.GetLabel() {
				ok = ok || (lp.GetName() == k && lp.GetValue() == v)
			}
			if !ok {
				continue next
			}
		}
		return m
	}
	return nil
}

func count(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }
func sum(m *dto.Metric) float64   { return m.GetHistogram().GetSampleSum() }

// warmupFile writes a warmup file of single requests of the given sizes
// into base/1.
func warmupFile(t *testing.T, base string, sizes ...int) {
	t.Helper()
	var reqs []*tfserving.PredictRequest
	for _, rows := range sizes {
		reqs = append(reqs, &tfserving.PredictRequest{
			ModelSpec: &tfserving.ModelSpec{Name: "m"},
			Inputs: map[string]*tfserving.TensorProto{"x": {
				Dtype:       tfserving.DataType_DT_FLOAT,
				TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: int64(rows)}, {Size: 4}}},
				FloatVal:    make([]float32, rows*4),
			}},
		})
	}
	var buf bytes.Buffer
	if err := warmup.Write(&buf, reqs); err != nil {
		t.Fatal(err)
	}
	writeAt(t, filepath.Join(base, "1", warmup.FileName), buf.String())
}

func sleep50() { time.Sleep(50 * time.Millisecond) }
