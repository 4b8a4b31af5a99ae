package sim

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/emulator/model"
)

// TestCalibrationRoundTrip checks Encode and DecodeCalibration are
// inverses.
func TestCalibrationRoundTrip(t *testing.T) {
	c := testCalibration()
	c.Contention = []ContentionSample{{Intra: 1, Rows: 8, K: 2, WallUS: 300, CPUus: 290}}
	var b bytes.Buffer
	if err := c.Encode(&b); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCalibration(&b, "cal.json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestCalibrationProblems checks a bad calibration is refused with every
// problem named by its field, and malformed JSON by its line.
func TestCalibrationProblems(t *testing.T) {
	c := testCalibration()
	c.Format = "v0"
	c.Cores = 0
	c.Host[1].Intra = 1
	c.Host[0].Points[2].Rows = 4
	c.Host[0].Points[1].MainWallUS = 0
	c.Serving.RequestCPUus = -1
	c.Noise.RunSigma = 2
	err := c.Validate()
	for _, want := range []string{"format:", "cores:", "host[1].intra: 1 is listed twice", "host[0].points[2].rows:",
		"host[0].points[1].main_wall_us:", "serving.request_cpu_us:", "noise.run_sigma:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
	_, err = DecodeCalibration(strings.NewReader("{\n\"format\": \"x\",\n\"cores\": \"two\"\n}"), "bad.json")
	if !errors.Is(err, ErrCalibration) || !strings.Contains(err.Error(), "bad.json:3") {
		t.Errorf("error %v, want ErrCalibration at bad.json:3", err)
	}
	_, err = DecodeCalibration(strings.NewReader(`{"format": "x", "colour": 1}`), "extra.json")
	if !errors.Is(err, ErrCalibration) || !strings.Contains(err.Error(), "colour") {
		t.Errorf("error %v, want the unknown field named", err)
	}
}

// TestHostWork checks the interpolation between measured batch sizes and
// the parallelism read from CPU over wall time.
func TestHostWork(t *testing.T) {
	h := HostCurve{Intra: 4, Points: []HostPoint{
		{Rows: 1, MainCPUus: 100, MainWallUS: 100},
		{Rows: 8, MainCPUus: 790, MainWallUS: 490, AfterCPUus: 10, AfterWallUS: 10},
		{Rows: 16, MainCPUus: 1580, MainWallUS: 880, AfterCPUus: 20, AfterWallUS: 20},
		{Rows: 32, MainCPUus: 3160, MainWallUS: 3180, AfterCPUus: 40, AfterWallUS: 20},
	}}
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	tests := []struct {
		name        string
		rows, cores int
		main, after work
	}{
		// A measured size is taken as measured; its parallelism is that of
		// the whole execution, (790+10)/(490+10).
		{"measured", 8, 2, work{us(790), 1.6}, work{us(10), 1}},
		// Halfway between 8 and 16: halfway between their figures
		// (parallelism 1.6 and 1600/900).
		{"between", 12, 2, work{us(1185), (1.6 + 1600.0/900) / 2}, work{us(15), 1}},
		// A size whose parallelism fell (another process held a core)
		// keeps the best seen below it.
		{"envelope", 32, 2, work{us(3160), 1600.0 / 900}, work{us(40), 1}},
		// Beyond the largest size: the last segment extended.
		{"beyond", 48, 2, work{us(4740), 1600.0 / 900}, work{us(60), 1}},
		// Parallelism never exceeds the cores.
		{"one core", 16, 1, work{us(1580), 1}, work{us(20), 1}},
	}
	for _, tt := range tests {
		main, after := h.hostWork(tt.rows, tt.cores)
		if diff := cmp.Diff([]work{tt.main, tt.after}, []work{main, after}, cmp.AllowUnexported(work{}), cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
			t.Errorf("%s: rows %d (-want +got):\n%s", tt.name, tt.rows, diff)
		}
	}
	if h.Points[3].MainWallUS != 3180 {
		t.Errorf("the recorded point was changed: %+v", h.Points[3])
	}
	// One intra-op thread: parallelism as measured, no envelope.
	h.Intra = 1
	if main, _ := h.hostWork(32, 2); main.par != 1 {
		t.Errorf("one intra-op thread at 32 rows: parallelism %v, want 1 (as measured there)", main.par)
	}
}

// TestMeasureHost measures the bundled models' real device code briefly
// and checks the figures are sane: positive, growing with the batch, no
// more parallel than the cores, and for the accelerator a projection
// cheaper than the preprocessing.
func TestMeasureHost(t *testing.T) {
	for _, name := range []string{"mlp", "ranker"} {
		t.Run(name, func(t *testing.T) {
			m, err := model.Load("../../configs/models/" + name)
			if err != nil {
				t.Fatal(err)
			}
			cal, err := MeasureHost(context.Background(), name, m.Desc, HostOptions{
				Rows: []int{1, 16}, Intra: []int{1, 2}, Contention: []int{2}, MinTime: 20 * time.Millisecond, MinReps: 3,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(cal.Host) != 2 || len(cal.Contention) != 4 || cal.Device != m.Desc.Device {
				t.Fatalf("got %d curves, %d contention samples, device %q", len(cal.Host), len(cal.Contention), cal.Device)
			}
			for _, h := range cal.Host {
				small, big := h.Points[0], h.Points[1]
				if small.MainCPUus <= 0 || big.MainCPUus <= small.MainCPUus {
					t.Errorf("intra %d: main CPU %v µs at 1 row, %v at 16: want positive and growing", h.Intra, small.MainCPUus, big.MainCPUus)
				}
				// CPU time counts the whole process, so the main work
				// alone cannot beat the cores by much.
				for _, p := range h.Points {
					if par := p.MainCPUus / p.MainWallUS; par > float64(cal.Cores)*1.5 {
						t.Errorf("intra %d rows %d: parallelism %.2f on %d cores", h.Intra, p.Rows, par, cal.Cores)
					}
				}
				if name == "ranker" && !(big.AfterCPUus > 0 && big.AfterCPUus < big.MainCPUus) {
					t.Errorf("intra %d: projection %v µs beside preprocessing %v µs", h.Intra, big.AfterCPUus, big.MainCPUus)
				}
			}
			cal.Serving, cal.Noise = ServingCosts{ClientCPUus: 1}, Noise{}
			if err := cal.Validate(); err != nil {
				t.Errorf("measured calibration does not validate: %v", err)
			}
		})
	}
}

// TestCheckContention checks the prediction for k executions at once:
// two single-threaded ones fit two cores, four share them.
func TestCheckContention(t *testing.T) {
	c := testCalibration()
	c.Host = []HostCurve{{Intra: 1, Points: []HostPoint{{Rows: 8, MainCPUus: 1000, MainWallUS: 1000}}}}
	c.Contention = []ContentionSample{{Intra: 1, Rows: 8, K: 2}, {Intra: 1, Rows: 8, K: 4}, {Intra: 3, Rows: 8, K: 2}}
	var got []float64
	for _, ch := range c.CheckContention() {
		got = append(got, ch.PredictedUS)
	}
	// The sample at 3 intra-op threads has no curve and is skipped.
	if diff := cmp.Diff([]float64{1000, 2000}, got); diff != "" {
		t.Errorf("predicted wall µs (-want +got):\n%s", diff)
	}
}
