package tuner

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

func ptr(v float64) *float64 { return &v }

// TestJudgeStability: the rule on synthetic figures.
func TestJudgeStability(t *testing.T) {
	for _, tc := range []struct {
		name        string
		baseline    []float64
		steal, load *float64
		unstable    bool
		want        []string // pieces of the note
	}{
		// Repeats within a few percent, no steal, load about the cores.
		{"steady", []float64{100, 103, 98}, ptr(0.001), ptr(1.1), false, nil},
		// Nothing measured: nothing to say.
		{"unknown", nil, nil, nil, false, nil},
		// One repeat has no spread to judge.
		{"one repeat", []float64{100}, nil, nil, false, nil},
		// The baseline moved by a third between restarts.
		{"noisy baseline", []float64{100, 60, 130}, ptr(0), ptr(1), true,
			[]string{"the baseline's 3 repeats spread 36%", "quieter host", "confirmation.repeats (now 3)"}},
		// A VM whose hypervisor took 12% of the CPU.
		{"steal", []float64{100, 101}, ptr(0.12), ptr(1), true, []string{"12% of the CPU time was stolen"}},
		// Other jobs: 5 runnable threads per core.
		{"load", nil, nil, ptr(5), true, []string{"load average was 5.0 per core"}},
		// Just under every limit.
		{"at the limits", []float64{100, 100 + 2*maxBaselineCV*100*0.7}, ptr(maxSteal), ptr(maxLoadPerCore), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := judgeStability(tc.baseline, tc.steal, tc.load, 3)
			if st.Unstable != tc.unstable {
				t.Fatalf("unstable %v, want %v (%+v)", st.Unstable, tc.unstable, st)
			}
			if !tc.unstable && st.Note != "" {
				t.Errorf("a steady machine got a note: %q", st.Note)
			}
			for _, w := range tc.want {
				if !strings.Contains(st.Note, w) {
					t.Errorf("note %q lacks %q", st.Note, w)
				}
			}
			if len(tc.baseline) >= 2 && (st.BaselineCV == nil || st.BaselineRepeats != len(tc.baseline)) {
				t.Errorf("the baseline's spread was not recorded: %+v", st)
			}
		})
	}
	cv := *judgeStability([]float64{90, 110}, nil, nil, 2).BaselineCV
	if want := math.Sqrt(200) / 100; math.Abs(cv-want) > 1e-9 {
		t.Errorf("CV of 90, 110: %v, want %v (sample standard deviation over mean)", cv, want)
	}
}

// fakeHost is a machine whose CPU counters and load the test sets: the
// first read is the run's start, every later one its end.
type fakeHost struct {
	mu    sync.Mutex
	reads int
	steal float64 // share of the run's CPU time stolen
	load  float64
}

func (h *fakeHost) read() probe.HostSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	if h.reads == 1 {
		return probe.HostSample{TotalTicks: 1000, StealTicks: 5, CPUOK: true, Load1: 0.5, LoadOK: true}
	}
	return probe.HostSample{TotalTicks: 11000, StealTicks: 5 + uint64(h.steal*10000), CPUOK: true, Load1: h.load, LoadOK: true}
}

// TestRunSaysTheMachineWasUnstable: through the tuner's fakes, a run that
// ends with no recommendation on a machine with CPU steal and a high load
// says so with the figures and what to do, and keeps the figures with the
// run; on a steady machine the same run says nothing of it.
func TestRunSaysTheMachineWasUnstable(t *testing.T) {
	// Every configuration breaks the 30 ms SLO.
	tooSlow := func(b configs.Batching) (float64, time.Duration) {
		q, p99 := testSurface(b)
		return q, p99 + 40*time.Millisecond
	}
	for _, tc := range []struct {
		name        string
		steal, load float64
		unstable    bool
	}{
		{"busy VM", 0.15, 9, true},
		{"steady", 0, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStudy(t, "")
			db := storetest.Open(t)
			rt := &fakeRuntime{}
			host := &fakeHost{steal: tc.steal, load: tc.load}
			tu, err := New(s, db, rt, &fakeProber{rt: rt, surface: tooSlow}, &Options{Cores: 2, Host: host.read})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := tu.Run(context.Background(), RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Run.Outcome != store.OutcomeNoFeasible {
				t.Fatalf("outcome %s, want no_feasible", rep.Run.Outcome)
			}
			stored, err := db.Run(context.Background(), s.Name, rep.Run.ID)
			if err != nil {
				t.Fatal(err)
			}
			st := stored.Stability
			if st == nil || st.Steal == nil || st.LoadPerCore == nil {
				t.Fatalf("stored stability %+v: want the steal and load figures", st)
			}
			if math.Abs(*st.Steal-tc.steal) > 1e-9 || math.Abs(*st.LoadPerCore-tc.load/2) > 1e-9 {
				t.Errorf("stored steal %v, load per core %v; want %v, %v", *st.Steal, *st.LoadPerCore, tc.steal, tc.load/2)
			}
			said := strings.Contains(stored.Detail, "the machine looked unstable")
			if st.Unstable != tc.unstable || said != tc.unstable {
				t.Errorf("unstable %v, detail says so %v; want %v: %q", st.Unstable, said, tc.unstable, stored.Detail)
			}
			if tc.unstable {
				for _, w := range []string{"15% of the CPU time was stolen", "4.5 per core", "quieter host", "confirmation.repeats (now 3)"} {
					if !strings.Contains(stored.Detail, w) {
						t.Errorf("detail %q lacks %q", stored.Detail, w)
					}
				}
			}
		})
	}
}

// TestRunRecordsTheBaselineSpread: the baseline's repeat spread reaches
// the run's record; a clear winner's detail does not blame the machine,
// since the noise did not cost the verdict.
func TestRunRecordsTheBaselineSpread(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "prod.config")
	if err := os.WriteFile(base, []byte("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := testStudy(t, "")
	s.Confirmation.Baseline = base
	db := storetest.Open(t)
	rt := &fakeRuntime{}
	n := 0
	p := &fakeProber{rt: rt, surface: func(b configs.Batching) (float64, time.Duration) {
		q, p99 := testSurface(b)
		if b.MaxBatchSize == 8 && b.BatchTimeoutMicros == 0 {
			// The baseline: +-30% from one restart to the next.
			n++
			q *= 1 + 0.3*float64(n%3-1)
		}
		return q, p99
	}}
	host := &fakeHost{}
	tu, err := New(s, db, rt, p, &Options{Cores: 2, Host: host.read})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tu.Run(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := rep.Run.Stability
	if rep.Run.Outcome != store.OutcomeRecommended || st == nil || st.BaselineCV == nil {
		t.Fatalf("outcome %s, stability %+v: want a recommendation with the baseline's spread", rep.Run.Outcome, st)
	}
	if *st.BaselineCV < 0.2 || st.BaselineRepeats < 3 || !st.Unstable {
		t.Errorf("baseline CV %.3f over %d repeats, unstable %v; want about 0.3 over 3+, unstable", *st.BaselineCV, st.BaselineRepeats, st.Unstable)
	}
	if weakGain(rep.Confirmation) || strings.Contains(rep.Run.Detail, "unstable") {
		t.Errorf("a clear winner (gain %+v) blamed the machine: %q", rep.Confirmation.Gain, rep.Run.Detail)
	}
}
