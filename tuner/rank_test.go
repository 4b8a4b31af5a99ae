package tuner

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// TestCandidatesFollowTheStrategysRanking: the confirmation stage's
// candidates come in the strategy's order (search.Rank). Of a search that
// measured every configuration once, one run of max_batch_size 64 with a
// 2 ms timeout, where its neighbours break the 30 ms SLO, came out just
// under it with the highest throughput. Grid ranks by the measurements
// and confirms it first; Bayes's models, which saw its neighbours, hand
// confirmation configurations that surely meet the SLO instead.
func TestCandidatesFollowTheStrategysRanking(t *testing.T) {
	// TEST FIXTURE, a closed-form toy: QPS 100 × batch × √threads, P99 4 ms
	// + 0.4 ms per row of the batch + the timeout.
	measure := func(b, tau, n int64) (float64, time.Duration) {
		qps := 100 * float64(b) * float64(map[int64]float64{1: 1, 2: 1.41, 4: 2}[n])
		return qps, 4*time.Millisecond + time.Duration(b)*400*time.Microsecond + time.Duration(tau)*time.Microsecond
	}
	for _, tc := range []struct {
		strategy  string
		wantLucky bool
	}{{"grid", true}, {"bayes", false}} {
		doc := `name: rank
target:
  runtime: process
  model: {name: m, base_path: /models/m}
  process: {binary: /bin/true}
load: {mode: closed, concurrency: 64}
slo: {latency: 30ms}
objective: max_throughput
space:
  max_batch_size: {values: [8, 16, 32, 64]}
  batch_timeout_micros: {values: [0, 2000, 5000]}
  num_batch_threads: {values: [1, 2, 4]}
search: {strategy: ` + tc.strategy + `, trials: 40, seed: 1}
confirmation: {top_k: 2, repeats: 3}
`
		s, err := configs.ParseStudy(filepath.Join(t.TempDir(), "rank.yaml"), []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		tu := newTestTuner(t, s, storetest.Open(t), &fakeRuntime{}, &fakeProber{}, nil)
		var trials []store.Trial
		lucky := ""
		for _, b := range []int64{8, 16, 32, 64} {
			for _, tau := range []int64{0, 2000, 5000} {
				for _, n := range []int64{1, 2, 4} {
					qps, p99 := measure(b, tau, n)
					cfg := []store.Param{{Name: "max_batch_size", Value: b}, {Name: "batch_timeout_micros", Value: tau}, {Name: "num_batch_threads", Value: n}}
					if b == 64 && tau == 2000 && n == 4 {
						qps, p99 = qps*1.3, 29900*time.Microsecond // truly 31.6 ms
						lucky = configOf(cfg).Key()
					}
					obj := qps
					trials = append(trials, store.Trial{Seq: uint64(len(trials) + 1), Role: store.RoleSearch, State: store.TrialSucceeded,
						Config: cfg, Objective: &obj, Feasible: p99 <= 30*time.Millisecond,
						Summary: store.Summary{P99: p99, Throughput: qps}})
				}
			}
		}
		cands, err := tu.candidates(t.Context(), trials)
		if err != nil {
			t.Fatalf("%s: %v", tc.strategy, err)
		}
		if len(cands) < 2 {
			t.Fatalf("%s: %d candidates, want at least the top 2", tc.strategy, len(cands))
		}
		first := configOf(cands[0].Config).Key() == lucky
		if first != tc.wantLucky {
			t.Errorf("%s: first candidate %s (%v), lucky run first = %v, want %v", tc.strategy, cands[0].Label, cands[0].Config, first, tc.wantLucky)
		}
		for _, c := range cands[:2] {
			if c.SearchObjective == nil || c.Label == "" {
				t.Errorf("%s: candidate %v lost its search trial's label or objective", tc.strategy, c.Config)
			}
		}
	}
}
