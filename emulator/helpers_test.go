package emulator

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/batchtune/batchtune/tfserving"
)

// accelJSON is a small accelerator model: 4 features, 1 score, 2 ms per
// batch, no jitter, no cold start.
const accelJSON = `{
  "signatures": {
    "serving_default": {
      "inputs": {"x": {"dtype": "DT_FLOAT", "shape": [-1, 4]}},
      "outputs": {"score": {"dtype": "DT_FLOAT", "shape": [-1, 1]}}
    }
  },
  "device": "accelerator",
  "accelerator": {"launch_us": 2000, "item_us": 1, "memory_mib": 2000, "activation_kib_per_item": 1024}
}`

// mlpJSON is a small two-input CPU model with two outputs.
const mlpJSON = `{
  "signatures": {
    "serving_default": {
      "inputs": {
        "dense": {"dtype": "DT_FLOAT", "shape": [-1, 3]},
        "ids": {"dtype": "DT_INT64", "shape": [-1, 2]}
      },
      "outputs": {
        "a": {"dtype": "DT_FLOAT", "shape": [-1, 1]},
        "b": {"dtype": "DT_FLOAT", "shape": [-1, 2]}
      }
    },
    "other": {
      "inputs": {"all": {"dtype": "DT_FLOAT", "shape": [-1, 5]}},
      "outputs": {"c": {"dtype": "DT_FLOAT", "shape": [-1, 3]}}
    }
  },
  "device": "cpu",
  "cpu": {"hidden": [8]}
}`

// testModel writes a model base path with version 1 holding desc.
func testModel(t testing.TB, desc string) string {
	t.Helper()
	base := filepath.Join(t.TempDir(), "model")
	if err := os.MkdirAll(filepath.Join(base, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "1", "model.json"), []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	return base
}

// writeFile writes content to a temp file and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// running is an in-process stand-in with clients.
type running struct {
	srv     *Server
	conn    *grpc.ClientConn
	predict tfserving.PredictionServiceClient
	models  tfserving.ModelServiceClient
	rest    string // http://host:port
}

// start runs a stand-in on loopback listeners with cfg (ModelName "m" and
// monitoring on unless set) and stops it at cleanup.
func start(t testing.TB, cfg Config) *running {
	t.Helper()
	if cfg.ModelName == "" {
		cfg.ModelName = "m"
	}
	if cfg.MonitoringConfigFile == "" {
		cfg.MonitoringConfigFile = writeFile(t, "monitoring.config", `prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }`)
	}
	if cfg.RESTAPITimeout == 0 {
		cfg.RESTAPITimeout = 30 * time.Second
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.GRPCListener, cfg.RESTListener = gl, rl
	srv, err := Start(context.Background(), cfg)
	if err != nil {
		gl.Close()
		rl.Close()
		t.Fatalf("Start: %v", err)
	}
	conn, err := grpc.NewClient(srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &running{
		srv: srv, conn: conn,
		predict: tfserving.NewPredictionServiceClient(conn),
		models:  tfserving.NewModelServiceClient(conn),
		rest:    "http://" + srv.RESTAddr().String(),
	}
}

// scrape reads the stand-in's Prometheus text and parses it with expfmt.
func (r *running) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(r.rest + DefaultMonitoringPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing metrics: %v", err)
	}
	return fams
}

// metric finds the sample of family name whose labels include want.
func metric(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// floatInput builds a DT_FLOAT TensorProto [rows, cols] with float_val.
func floatInput(rows, cols int, v float32) *tfserving.TensorProto {
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = v + float32(i)/100
	}
	return &tfserving.TensorProto{
		Dtype:       tfserving.DataType_DT_FLOAT,
		TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: int64(rows)}, {Size: int64(cols)}}},
		FloatVal:    vals,
	}
}

// logRecorder is a slog handler keeping messages.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.msgs = append(l.msgs, b.String())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}
