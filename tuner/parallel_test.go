package tuner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// parallelStudy is testStudy on runtime kubernetes with parallelism n.
func parallelStudy(t *testing.T, n int) *configs.Study {
	t.Helper()
	doc := fmt.Sprintf(`name: fake
target:
  runtime: kubernetes
  model: {name: m}
  kubernetes: {image: tfs}
load: {mode: closed, concurrency: 8}
slo: {latency: 30ms}
objective: max_throughput
space:
  max_batch_size: {values: [1, 8, 32, 64]}
  batch_timeout_micros: {values: [0, 2000, 9000]}
search: {strategy: grid, trials: 12, seed: 1, parallelism: %d}
confirmation: {top_k: 1, repeats: 2}
`, n)
	s, err := configs.ParseStudy(filepath.Join(t.TempDir(), "fake.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestParallelSearchComparesNodesAndConfirmsOnOne: with parallelism 2
// on two nodes, the first (node-b) at half the speed of the other, trials
// run two at a time, every trial records its node, the baseline is
// measured on both nodes, the search's ranking reads node-a's trials at
// node-b's speed, and confirmation runs on node-b only. The surface's
// best is searched on the slow node: ranked by raw figures it would not
// even be a candidate, so the winner being it shows the comparison.
func TestParallelSearchComparesNodesAndConfirmsOnOne(t *testing.T) {
	s := parallelStudy(t, 2)
	rt := &fakeRuntime{nodes: []string{"node-b", "node-a"}}
	pr := &fakeProber{rt: rt, surface: testSurface,
		scale: func(ep runtime.Endpoints) float64 {
			if strings.HasSuffix(ep.GRPC, "@node-b") {
				return 0.5
			}
			return 1
		},
		hook: func(ctx context.Context, _ int) error {
			select { // long enough for the other slot's trial to overlap
			case <-time.After(30 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		}}
	tu, err := New(s, storetest.Open(t), rt, pr, &Options{Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tu.Run(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rt.peak != 2 {
		t.Errorf("at most %d servers ran at once, want 2", rt.peak)
	}
	refs := map[string]int{}
	var bestSearchNode string
	for _, tr := range rep.Trials {
		if tr.Node == "" && tr.State != store.TrialRejected {
			t.Errorf("trial %d (%s): no node recorded", tr.Seq, tr.Role)
		}
		switch tr.Role {
		case store.RoleReference:
			refs[tr.Node]++
		case store.RoleConfirm, store.RoleBaseline:
			if tr.Node != "node-b" {
				t.Errorf("confirmation trial %d ran on %q, want node-b (the search's first node)", tr.Seq, tr.Node)
			}
		case store.RoleSearch:
			if configOf(tr.Config).Key() == bestKey(t) {
				bestSearchNode = tr.Node
			}
		}
	}
	if refs["node-a"] != 1 || refs["node-b"] != 1 {
		t.Errorf("reference trials per node %v, want one on each", refs)
	}
	if bestSearchNode != "node-b" {
		t.Fatalf("the best configuration was searched on %q: this test needs it on the slow node, where raw figures would rank it second (top_k is 1)", bestSearchNode)
	}
	got := "none"
	if w := rep.Confirmation.WinnerCandidate(); w != nil {
		got = configOf(w.Config).Key()
	}
	if got != bestKey(t) {
		t.Errorf("winner %s, want the surface's best %s (measured on the slow node in the search)", got, bestKey(t))
	}
}

// bestKey is testSurface's best feasible configuration (P99 within 30 ms).
func bestKey(t *testing.T) string {
	t.Helper()
	var best string
	var top float64
	for _, mbs := range []int64{1, 8, 32, 64} {
		for _, to := range []int64{0, 2000, 9000} {
			qps, p99 := testSurface(configs.Batching{MaxBatchSize: mbs, BatchTimeoutMicros: to})
			if p99 <= 30*time.Millisecond && qps > top {
				top = qps
				best = configOf([]store.Param{{Name: "max_batch_size", Value: mbs}, {Name: "batch_timeout_micros", Value: to}}).Key()
			}
		}
	}
	return best
}

// serialRuntime hides a runtime's StartSlot: one server at a time.
type serialRuntime struct{ runtime.Runtime }

// TestParallelismNeedsAConcurrentRuntime: a runtime that runs one server
// at a time is refused for parallelism above 1, naming the field.
func TestParallelismNeedsAConcurrentRuntime(t *testing.T) {
	s := parallelStudy(t, 2)
	_, err := New(s, storetest.Open(t), serialRuntime{&fakeRuntime{}}, &fakeProber{}, nil)
	if err == nil || !strings.Contains(err.Error(), "search.parallelism: 2") {
		t.Errorf("got %v, want a refusal naming search.parallelism", err)
	}
}

// TestParallelRoundInterruptedRecordsEveryTrial: cancelling the run while
// two trials measure records both as interrupted and the run resumable.
func TestParallelRoundInterruptedRecordsEveryTrial(t *testing.T) {
	s := parallelStudy(t, 2)
	rt := &fakeRuntime{nodes: []string{"n1"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	pr := &fakeProber{rt: rt, surface: testSurface, hook: func(tctx context.Context, call int) error {
		if call == 3 {
			once.Do(cancel)
		}
		<-time.After(20 * time.Millisecond)
		return tctx.Err()
	}}
	db := storetest.Open(t)
	tu, err := New(s, db, rt, pr, &Options{Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tu.Run(ctx, RunOptions{})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("got %v, want ErrInterrupted", err)
	}
	interrupted := 0
	for _, tr := range rep.Trials {
		if !tr.State.Terminal() {
			t.Errorf("trial %d left %s", tr.Seq, tr.State)
		}
		if tr.State == store.TrialInterrupted {
			interrupted++
		}
	}
	if interrupted != 2 {
		t.Errorf("%d trials interrupted, want the round's 2", interrupted)
	}
	if rep.Run.State != store.RunInterrupted {
		t.Errorf("run %s, want interrupted", rep.Run.State)
	}
}
