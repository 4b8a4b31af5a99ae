package replay

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/search"
)

func TestReplayAnswersWithRecordedMeasurements(t *testing.T) {
	s, err := Decode(strings.NewReader(tinyLines(
		`{"config":[8,0],"qps":100,"p99_us":20000,"error_rate":0}`,
		`{"config":[8,0],"qps":110,"p99_us":70000,"error_rate":0}`,
		`{"config":[8,0],"qps":120,"p99_us":30000,"error_rate":0.05}`,
		`{"config":[16,0],"oom":true,"qps":0,"p99_us":0,"error_rate":0}`,
	)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	c8 := search.Config{{Name: search.MaxBatchSize, Value: 8}, {Name: search.BatchTimeoutMicros, Value: 0}}
	// Each recorded run, with the verdict for that run alone (SLO 60 ms,
	// error budget 0.01).
	recorded := map[float64]search.Trial{
		100: {Config: c8, Outcome: search.Succeeded, Measured: true, Value: 100, QPS: 100, P99: 20 * time.Millisecond, Feasible: true},
		110: {Config: c8, Outcome: search.Succeeded, Measured: true, Value: 110, QPS: 110, P99: 70 * time.Millisecond},
		120: {Config: c8, Outcome: search.Succeeded, Measured: true, Value: 120, QPS: 120, P99: 30 * time.Millisecond, ErrorRate: 0.05},
	}
	seen := map[float64]int{}
	for seed := range uint64(60) {
		tr, err := s.Replay(seed).Run(c8)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := recorded[tr.QPS]
		if !ok {
			t.Fatalf("seed %d: trial %+v is not a recorded run", seed, tr)
		}
		if tr.Outcome != want.Outcome || tr.Feasible != want.Feasible || tr.P99 != want.P99 || tr.Value != want.Value || tr.ErrorRate != want.ErrorRate || !tr.Measured {
			t.Errorf("seed %d: got %+v, want %+v", seed, tr, want)
		}
		seen[tr.QPS]++
		again, _ := s.Replay(seed).Run(c8)
		if again.QPS != tr.QPS {
			t.Errorf("seed %d: a fresh replayer drew %v, then %v", seed, tr.QPS, again.QPS)
		}
	}
	// 60 draws from 3 runs: each should come up (p of missing one < 1e-10).
	if len(seen) != 3 {
		t.Errorf("draws %v: want every recorded run drawn", seen)
	}

	// Repeated visits under one seed draw afresh.
	r := s.Replay(1)
	draws := map[float64]bool{}
	for range 30 {
		tr, _ := r.Run(c8)
		draws[tr.QPS] = true
	}
	if len(draws) < 2 {
		t.Errorf("30 visits under one seed always drew %v", draws)
	}

	// A run that did not load is a failed trial.
	c16 := search.Config{{Name: search.MaxBatchSize, Value: 16}, {Name: search.BatchTimeoutMicros, Value: 0}}
	if tr, _ := s.Replay(1).Run(c16); tr.Outcome != search.Failed || tr.Measured {
		t.Errorf("OOM run replayed as %+v, want failed and unmeasured", tr)
	}
	// A rule-breaking configuration is rejected, never looked up.
	bad := search.Config{{Name: search.MaxBatchSize, Value: 8}, {Name: search.BatchTimeoutMicros, Value: 30000}}
	if tr, err := s.Replay(1).Run(bad); err != nil || tr.Outcome != search.Rejected {
		t.Errorf("SLO/3 breaker replayed as %+v, %v; want rejected", tr, err)
	}
}

func TestReplayOfAnUnrecordedConfiguration(t *testing.T) {
	s, err := NewSurface(mustHeader(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Measurement{Config: []int64{8, 0}, QPS: 1, P99Micros: 1}); err != nil {
		t.Fatal(err)
	}
	c16 := search.Config{{Name: search.MaxBatchSize, Value: 16}, {Name: search.BatchTimeoutMicros, Value: 0}}
	if _, err := s.Replay(1).Run(c16); !errors.Is(err, ErrNotRecorded) {
		t.Errorf("err = %v, want ErrNotRecorded", err)
	}
}

func mustHeader(t *testing.T) Header {
	s, err := Decode(strings.NewReader(tinyLines(line8, line16)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	return s.Header
}

// TestCommonRandomNumbers: two strategies that run the same configuration
// under the same seed see the same measurement, whatever else they ran.
func TestCommonRandomNumbers(t *testing.T) {
	s := smallSurface(t, 1, 5)
	all, _ := s.Space().Runnable(t.Context())
	a, b := s.Replay(9), s.Replay(9)
	for _, c := range all[:10] {
		if _, err := a.Run(c); err != nil { // a has seen ten others first
			t.Fatal(err)
		}
	}
	x, _ := a.Run(all[20])
	y, _ := b.Run(all[20])
	if x.QPS != y.QPS || math.IsNaN(x.QPS) {
		t.Errorf("same seed, same configuration: %v vs %v", x.QPS, y.QPS)
	}
}

// A min_latency run is judged as the tuner judges a min_latency trial
// (objective.Constraints): it must achieve the rate and keep P99 within the
// SLO. A run that keeps the rate at a P99 over the SLO is infeasible, both
// as a replayed trial and in the truth; before the rule had one home the
// benchmark took it as feasible, and graded searches on open-loop surfaces
// against configurations the tuner would never recommend.
func TestMinLatencyRunsMeetTheSLO(t *testing.T) {
	header := strings.Replace(tinyHeader, `"objective":"max_throughput","concurrency":8`, `"objective":"min_latency","rate":100`, 1)
	s, err := Decode(strings.NewReader(header+"\n"+strings.Join([]string{
		`{"config":[8,0],"qps":100,"p99_us":20000,"error_rate":0}`,  // rate kept, P99 within 60 ms
		`{"config":[16,0],"qps":100,"p99_us":70000,"error_rate":0}`, // rate kept, P99 over it
	}, "\n")+"\n"), "open")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		mbs      int64
		feasible bool
	}{{8, true}, {16, false}} {
		c := tinyConfig(tt.mbs)
		tr, err := s.Replay(1).Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Feasible != tt.feasible {
			t.Errorf("max_batch_size %d replayed feasible %v (P99 %s, QPS %v), want %v", tt.mbs, tr.Feasible, tr.P99, tr.QPS, tt.feasible)
		}
		if truth, ok := s.Truth(c); !ok || truth.Feasible != tt.feasible {
			t.Errorf("max_batch_size %d: truth %+v, want feasible %v", tt.mbs, truth, tt.feasible)
		}
	}
	if best, _, ok := s.Best(); !ok || best[0].Value != 8 {
		t.Errorf("best %v, want max_batch_size 8, the one within the SLO", best)
	}
}

// With EarlyStop a run over the SLO is answered as the tuner records a run
// its probe ended early: early-stopped, its figures kept, infeasible. A
// feasible run and a run that did not load are answered as before, and
// without EarlyStop the same run is a completed infeasible trial.
func TestReplayEarlyStop(t *testing.T) {
	s, err := Decode(strings.NewReader(tinyLines(
		`{"config":[8,0],"qps":100,"p99_us":20000,"error_rate":0}`,
		`{"config":[16,0],"qps":150,"p99_us":70000,"error_rate":0}`,
	)), "early")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		mbs   int64
		early bool
		want  search.Outcome
	}{
		{8, true, search.Succeeded},
		{16, true, search.EarlyStopped},
		{16, false, search.Succeeded},
	} {
		r := s.Replay(1)
		r.EarlyStop = tt.early
		tr, err := r.Run(tinyConfig(tt.mbs))
		if err != nil {
			t.Fatal(err)
		}
		if tr.Outcome != tt.want || !tr.Measured || tr.QPS == 0 {
			t.Errorf("max_batch_size %d, early stop %v: %+v, want outcome %v with its figures", tt.mbs, tt.early, tr, tt.want)
		}
		if tt.mbs == 16 && tr.Feasible {
			t.Errorf("max_batch_size %d, early stop %v: feasible at P99 %s over the 60 ms SLO", tt.mbs, tt.early, tr.P99)
		}
	}
}
