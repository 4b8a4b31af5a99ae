package emulator

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/batchtune/batchtune/emulator/sched"
)

type dtoMetric = dto.Metric

func counter(m *dto.Metric) float64   { return m.GetCounter().GetValue() }
func histCount(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }
func histSum(m *dto.Metric) float64   { return m.GetHistogram().GetSampleSum() }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func slogNew(h slog.Handler) *slog.Logger { return slog.New(h) }

func mkdirWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func withDefaults(c Config) Config {
	if c.Clock == nil {
		c.Clock = schedReal()
	}
	return c
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func schedReal() sched.Clock { return sched.Real() }
