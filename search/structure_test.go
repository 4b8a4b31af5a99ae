package search

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
)

func demoLikeSpace(t *testing.T, inFlight int) *Space {
	t.Helper()
	return batchSpace(t, 4, inFlight)
}

// batchSpace is the demo's space with max_batch_size from minBatch to 64.
func batchSpace(t *testing.T, minBatch int64, inFlight int) *Space {
	maxBatch := int64(64)
	t.Helper()
	return mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Min: &minBatch, Max: &maxBatch, Scale: configs.ScalePow2},
		{Name: BatchTimeoutMicros, Values: []int64{0, 1000, 5000, 20000, 40000}},
		{Name: NumBatchThreads, Values: []int64{1, 2, 4}},
		{Name: MaxEnqueuedBatches, Values: []int64{4, 16, 64}},
		{Name: GRPCMaxThreads, Values: []int64{8, 64}},
	}, Rules{SLO: 100 * time.Millisecond, Cores: 2, GPUs: 1, InFlight: inFlight})
}

// 32 rows in flight over k batch threads: batches of 32/k, the longest
// timeout under SLO/3 (40 ms is over 33.3 ms), the shortest queue, and the
// fewest gRPC threads that admit all 32 requests.
func TestSplit(t *testing.T) {
	s := demoLikeSpace(t, 32)
	for k, want := range map[int64]map[string]int64{
		1: {MaxBatchSize: 32, BatchTimeoutMicros: 20000, NumBatchThreads: 1, MaxEnqueuedBatches: 4, GRPCMaxThreads: 64},
		2: {MaxBatchSize: 16, BatchTimeoutMicros: 20000, NumBatchThreads: 2, MaxEnqueuedBatches: 4, GRPCMaxThreads: 64},
		4: {MaxBatchSize: 8, BatchTimeoutMicros: 20000, NumBatchThreads: 4, MaxEnqueuedBatches: 4, GRPCMaxThreads: 64},
	} {
		c, ok := s.Split(k)
		if !ok {
			t.Fatalf("Split(%d): not expressible", k)
		}
		got := map[string]int64{}
		for _, a := range c {
			got[a.Name] = a.Value
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Split(%d) (-want +got):\n%s", k, diff)
		}
	}
	// An open-loop study has no rows in flight to split.
	if _, ok := demoLikeSpace(t, 0).Split(1); ok {
		t.Error("Split under an open-loop load: want not expressible")
	}
}

// SplitSmall brackets the batch size from below. With 64 rows in flight
// over 4 threads Split's share is 16, and the geometric middle between the
// smallest max_batch_size (1) and 16 is 4; the queue must then hold the
// rows the 4 running batches do not: 64/4 - 4 = 12 batches, so 16 (Split's
// own point needs only the shortest). Everything else is Split's. On an
// axis starting at the share there is nothing below it to bracket.
func TestSplitSmall(t *testing.T) {
	s := smallBatchSpace(t)
	small, ok := s.SplitSmall(4)
	if !ok {
		t.Fatal("SplitSmall(4): not expressible")
	}
	split := mustSplit(t, s, 4)
	if v, _ := split.Get(MaxEnqueuedBatches); v != 4 {
		t.Errorf("Split(4) max_enqueued_batches = %d, want the shortest, 4", v)
	}
	wantSplitBut(t, "SplitSmall(4)", small, split, map[string]int64{MaxBatchSize: 4, MaxEnqueuedBatches: 16})
	if c, ok := demoLikeSpace(t, 16).SplitSmall(4); !ok || !c.Equal(mustSplit(t, demoLikeSpace(t, 16), 4)) {
		t.Errorf("SplitSmall(4) on an axis from the share = %v, want Split(4)'s point", c)
	}
}

// SplitFull rounds the share down to a batch the rows can fill: 24 rows in
// flight on a power-of-two axis, where Split(1) takes 32 (a batch that never
// fills) and SplitFull(1) 16, everything else Split's. Where the axis has
// the share itself the two agree.
func TestSplitFull(t *testing.T) {
	s := batchSpace(t, 1, 24)
	full, ok := s.SplitFull(1)
	if !ok {
		t.Fatal("SplitFull(1): not expressible")
	}
	split := mustSplit(t, s, 1)
	if v, _ := split.Get(MaxBatchSize); v != 32 {
		t.Errorf("Split(1) max_batch_size = %d, want 32 (the smallest that holds 24)", v)
	}
	wantSplitBut(t, "SplitFull(1)", full, split, map[string]int64{MaxBatchSize: 16})
	for _, k := range []int64{1, 2, 4} {
		if c, ok := demoLikeSpace(t, 32).SplitFull(k); !ok || !c.Equal(mustSplit(t, demoLikeSpace(t, 32), k)) {
			t.Errorf("SplitFull(%d) where the axis has the share = %v, want Split(%d)'s point", k, c, k)
		}
	}
}

// smallBatchSpace has max_batch_size from 1 and 64 rows in flight:
// SplitSmall(4) is its own point there.
func smallBatchSpace(t *testing.T) *Space {
	t.Helper()
	return batchSpace(t, 1, 64)
}

// wantSplitBut checks that got is split's point with the values in but
// instead of split's.
func wantSplitBut(t *testing.T, label string, got, split Config, but map[string]int64) {
	t.Helper()
	for _, a := range split {
		want, ok := but[a.Name]
		if !ok {
			want = a.Value
		}
		if v, _ := got.Get(a.Name); v != want {
			t.Errorf("%s %s = %d, want %d", label, a.Name, v, want)
		}
	}
}

func mustSplit(t *testing.T, s *Space, k int64) Config {
	t.Helper()
	c, ok := s.Split(k)
	if !ok {
		t.Fatalf("Split(%d): not expressible", k)
	}
	return c
}

// When grpc_max_threads is pinned below the load, it is the cap: a batch
// cannot exceed the requests the server admits.
func TestSplitUnderAPinnedGRPCLimit(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(4), Max: i64(64), Scale: configs.ScalePow2},
		{Name: NumBatchThreads, Values: []int64{1, 2}},
	}, Rules{SLO: 100 * time.Millisecond, Cores: 2, InFlight: 64, Fixed: PinnedFlags([]string{"--grpc_max_threads=16"})})
	c, ok := s.Split(1)
	if !ok {
		t.Fatal("Split(1): not expressible")
	}
	if v, _ := c.Get(MaxBatchSize); v != 16 {
		t.Errorf("Split(1) max_batch_size %d, want 16 (grpc_max_threads caps the 64 in flight)", v)
	}
	// The model inputs see 16 and 64 alike: both hold 16 rows.
	a, _ := s.modelInputs(Config{{MaxBatchSize, 16}, {NumBatchThreads, 1}})
	b, _ := s.modelInputs(Config{{MaxBatchSize, 64}, {NumBatchThreads, 1}})
	if len(a) != s.Dims()+2 || a[s.Dims()] != b[s.Dims()] {
		t.Errorf("structural inputs %v and %v: want the same effective batch for 16 and 64 under a cap of 16", a, b)
	}
	if a[0] == b[0] {
		t.Errorf("raw positions equal for max_batch_size 16 and 64: %v", a)
	}
}

func TestPinnedFlags(t *testing.T) {
	got := PinnedFlags([]string{"--grpc_max_threads=32", "--tensorflow_intra_op_parallelism", "2", "--port=8500", "--rest_api_num_threads=x", "positional"})
	want := map[string]int64{GRPCMaxThreads: 32, IntraOpParallelism: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PinnedFlags (-want +got):\n%s", diff)
	}
}

// The Bayesian design starts with the splits, then TF's defaults and the
// recipe, each once.
func TestBayesDesignStartsFromTheSplits(t *testing.T) {
	s := demoLikeSpace(t, 32)
	b := &Bayes{}
	out, err := b.Suggest(t.Context(), Request{Space: s, Objective: Objective{Kind: MaxThroughput, ErrorBudget: 0.01}, N: 5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, sg := range out {
		reasons = append(reasons, sg.Reason)
	}
	if diff := cmp.Diff([]string{"split", "split", "split", "tf-defaults-nearest", "recipe"}, reasons); diff != "" {
		t.Errorf("design reasons (-want +got):\n%s", diff)
	}
	if c, _ := s.Split(1); !out[0].Config.Equal(c) {
		t.Errorf("first suggestion %s, want Split(1) %s", out[0].Config, c)
	}
}

// Where the batch size can go below Split's share, the design brackets it
// from below with SplitSmall(4) right after the splits, unless bracket is
// switched off.
func TestBayesDesignBracketsTheBatchSize(t *testing.T) {
	s := smallBatchSpace(t)
	req := Request{Space: s, Objective: Objective{Kind: MaxThroughput, ErrorBudget: 0.01}, N: 6, Seed: 1}
	for _, tc := range []struct {
		bracket int
		want    []string
	}{
		{0, []string{"split", "split", "split", "split-small", "tf-defaults-nearest", "recipe"}},
		{-1, []string{"split", "split", "split", "tf-defaults-nearest", "recipe", "space-filling"}},
	} {
		out, err := (&Bayes{Bracket: tc.bracket}).Suggest(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, sg := range out {
			reasons = append(reasons, sg.Reason)
		}
		if diff := cmp.Diff(tc.want, reasons); diff != "" {
			t.Errorf("bracket %d: design reasons (-want +got):\n%s", tc.bracket, diff)
		}
		if c, _ := s.SplitSmall(4); tc.bracket == 0 && !out[3].Config.Equal(c) {
			t.Errorf("fourth suggestion %s, want SplitSmall(4) %s", out[3].Config, c)
		}
	}
}

// A max_capacity study holds no rows in flight, but its burst's
// concurrency is a guess of them: with burst_starts 1 its design starts
// with the splits of the burst's rows (the same points a throughput study
// with that many rows in flight gets), with 2 it runs them after TF's
// defaults and the recipe; by default (0, or -1) they are left out.
// Without a burst (an open-loop study) there is nothing to split.
func TestBayesCapacityDesignSplitsTheBurst(t *testing.T) {
	capacity := Objective{Kind: MaxCapacity, ErrorBudget: 0.01}
	burst := batchSpace(t, 1, 0)
	burst.rules.Burst = 64
	throughput := smallBatchSpace(t) // 64 rows in flight
	for _, tc := range []struct {
		s     *Space
		burst int
		want  []string
	}{
		{burst, 1, []string{"split", "split", "split", "split-small", "tf-defaults-nearest", "recipe"}},
		{burst, 2, []string{"tf-defaults-nearest", "recipe", "split", "split", "split", "split-small"}},
		{burst, 0, []string{"tf-defaults-nearest", "recipe", "space-filling", "space-filling", "space-filling", "space-filling"}},
		{burst, -1, []string{"tf-defaults-nearest", "recipe", "space-filling", "space-filling", "space-filling", "space-filling"}},
		{batchSpace(t, 1, 0), 1, []string{"tf-defaults-nearest", "recipe", "space-filling", "space-filling", "space-filling", "space-filling"}},
	} {
		out, err := (&Bayes{BurstStarts: tc.burst}).Suggest(t.Context(), Request{Space: tc.s, Objective: capacity, N: 6, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		splits := 0
		for i, sg := range out {
			reasons = append(reasons, sg.Reason)
			if sg.Reason != "split" {
				continue
			}
			splits++
			if c, _ := throughput.Split([]int64{1, 2, 4}[splits-1]); !sg.Config.Equal(c) {
				t.Errorf("burst_starts %d: start %d %s, want the throughput study's Split %s", tc.burst, i, sg.Config, c)
			}
		}
		if diff := cmp.Diff(tc.want, reasons); diff != "" {
			t.Errorf("burst %d, burst_starts %d: design reasons (-want +got):\n%s", tc.s.rules.Burst, tc.burst, diff)
		}
	}
}

// With explore 3, every third suggestion after the design is the next
// unfinished point of the study's Halton sequence, scored by the model so
// the stop rule can read it; the others are the model's.
func TestBayesExploreGivesEveryThirdTrialToTheHaltonSequence(t *testing.T) {
	s := conformanceSpace(t)
	hist := run(t, &Bayes{Init: 4}, s, 5, 1, 10)
	explored := 0
	for len(hist) < 16 {
		req := Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 5}
		sugg, err := (&Bayes{Init: 4, Explore: 3}).Suggest(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(sugg) != 1 {
			t.Fatalf("got %d suggestions after %d trials, want 1", len(sugg), len(hist))
		}
		isExplore := sugg[0].Reason == "explore: quasi-random"
		if want := (len(hist)-4)%3 == 2; isExplore != want {
			t.Errorf("after %d trials: reason %q, explore %v, want %v", len(hist), sugg[0].Reason, isExplore, want)
		}
		if isExplore {
			explored++
			pts, err := s.halton(t.Context(), 5, takenFrom(s, hist), 1)
			if err != nil || len(pts) != 1 {
				t.Fatalf("halton: %v, %d points", err, len(pts))
			}
			if want := s.configAt(pts[0]); !sugg[0].Config.Equal(want) {
				t.Errorf("explore after %d trials suggested %s, want the next Halton point %s", len(hist), sugg[0].Config, want)
			}
			if sugg[0].Expected == nil {
				t.Errorf("explore point after %d trials has no expected improvement", len(hist))
			}
		}
		hist = append(hist, toyTrial(s, sugg[0].Config))
	}
	if explored != 2 {
		t.Errorf("%d explore points in trials 11–16, want 2", explored)
	}
}

// With a portfolio of 3, every third suggestion after the design is a
// hill-climbing step, scored by the model so the stop rule can read it;
// a negative portfolio (or the default, 0) leaves every suggestion to the
// model.
func TestBayesPortfolioGivesEveryThirdTrialToHillClimbing(t *testing.T) {
	s := conformanceSpace(t)
	hist := run(t, &Bayes{Init: 4}, s, 5, 1, 10)
	off := append([]Trial(nil), hist...)
	for len(off) < 16 {
		sugg, err := (&Bayes{Init: 4, Portfolio: -1}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: off, N: 1, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(sugg) != 1 || strings.HasPrefix(sugg[0].Reason, "portfolio: ") {
			t.Fatalf("portfolio -1, after %d trials: got %+v, want one model suggestion", len(off), sugg)
		}
		off = append(off, toyTrial(s, sugg[0].Config))
	}
	steps := 0
	for len(hist) < 16 {
		sugg, err := (&Bayes{Init: 4, Portfolio: 3}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(sugg) != 1 {
			t.Fatalf("got %d suggestions after %d trials, want 1", len(sugg), len(hist))
		}
		isStep := strings.HasPrefix(sugg[0].Reason, "portfolio: ")
		if want := (len(hist)-4)%3 == 2; isStep != want {
			t.Errorf("after %d trials: reason %q, portfolio step %v, want %v", len(hist), sugg[0].Reason, isStep, want)
		}
		if isStep {
			steps++
			if sugg[0].Expected == nil {
				t.Errorf("portfolio step after %d trials has no expected improvement", len(hist))
			}
		}
		hist = append(hist, toyTrial(s, sugg[0].Config))
	}
	if steps != 2 {
		t.Errorf("%d portfolio steps in trials 11–16, want 2", steps)
	}
}

// sinceImprovement counts the trials since the best feasible objective last
// rose by 1% or more; Stall hands the next suggestion to hill-climbing once
// that count reaches it, then every other one while the stall lasts.
func TestBayesStallGivesWayToHillClimbing(t *testing.T) {
	s := conformanceSpace(t)
	c := s.Defaults()
	tr := func(v float64, feasible bool) Trial {
		return Trial{Config: c, Outcome: Succeeded, Measured: true, Value: v, Feasible: feasible}
	}
	req := Request{Space: s, Objective: throughput}
	for _, tc := range []struct {
		name string
		hist []Trial
		want int
	}{
		{"none feasible", []Trial{tr(100, false), tr(200, false)}, 2},
		{"just improved", []Trial{tr(100, true), tr(110, true)}, 0},
		{"under 1% is no improvement", []Trial{tr(100, true), tr(100.5, true), tr(100.9, true)}, 2},
		{"infeasible better ones do not count", []Trial{tr(100, true), tr(500, false), tr(90, true)}, 2},
		{"rejected trials did not run", []Trial{tr(100, true), {Config: c, Outcome: Rejected}}, 0},
	} {
		req.History = tc.hist
		if got := sinceImprovement(req); got != tc.want {
			t.Errorf("%s: sinceImprovement = %d, want %d", tc.name, got, tc.want)
		}
	}

	// Through Suggest: after the design, with the toy's history stalled.
	hist := run(t, &Bayes{Init: 4}, s, 5, 1, 10)
	req = Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 5}
	since := sinceImprovement(req)
	if since == 0 {
		t.Fatal("the toy history's last trial improved; the test needs a stalled one")
	}
	b := &Bayes{Init: 4, Stall: since}
	sugg, err := b.Suggest(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(sugg) != 1 || !strings.HasPrefix(sugg[0].Reason, "portfolio: ") {
		t.Fatalf("stall %d reached: got %+v, want a hill-climbing step", since, sugg)
	}
	b.Stall = since + 1
	if sugg, err = b.Suggest(t.Context(), req); err != nil || strings.HasPrefix(sugg[0].Reason, "portfolio: ") {
		t.Fatalf("stall %d not reached: got %+v (%v), want the model's suggestion", since+1, sugg, err)
	}
}

// TF's "auto" (0) for the parallelism flags runs one thread per core. By
// default the starting points snap it to the space's smallest value; with
// auto_cores 1 they snap it as the core count, in the TF-defaults start
// and in every Split start, which leaves the flags at TF's defaults. A
// space that holds 0 keeps 0 either way.
func TestBayesAutoCoresStarts(t *testing.T) {
	build := func(inter []int64) *Space {
		minBatch, maxBatch := int64(4), int64(64)
		return mustSpace(t, configs.SpaceSpec{
			{Name: MaxBatchSize, Min: &minBatch, Max: &maxBatch, Scale: configs.ScalePow2},
			{Name: BatchTimeoutMicros, Values: []int64{0, 1000, 5000, 20000}},
			{Name: NumBatchThreads, Values: []int64{1, 2, 4}},
			{Name: InterOpParallelism, Values: inter},
		}, Rules{SLO: 100 * time.Millisecond, Cores: 2, InFlight: 32})
	}
	throughput := Objective{Kind: MaxThroughput, ErrorBudget: 0.01}
	for _, tc := range []struct {
		inter []int64
		auto  int
		want  int64
	}{
		{[]int64{1, 2, 4}, 0, 1},
		{[]int64{1, 2, 4}, 1, 2},
		{[]int64{0, 1, 4}, 0, 0},
		{[]int64{0, 1, 4}, 1, 0},
	} {
		s := build(tc.inter)
		out, err := (&Bayes{AutoCores: tc.auto}).Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 5, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, sg := range out {
			if sg.Reason != "split" && sg.Reason != "tf-defaults-nearest" {
				continue
			}
			seen[sg.Reason] = true
			if got := s.value(sg.Config, InterOpParallelism); got != tc.want {
				t.Errorf("inter-op values %v, auto_cores %d: %s start %s runs inter-op %d, want %d", tc.inter, tc.auto, sg.Reason, sg.Config, got, tc.want)
			}
		}
		if !seen["split"] || !seen["tf-defaults-nearest"] {
			t.Errorf("inter-op values %v, auto_cores %d: design %v lacks a split or the TF-defaults start", tc.inter, tc.auto, out)
		}
	}
	// auto_cores 2 keeps today's starts and adds the other reading after
	// the TF-defaults start.
	s := build([]int64{1, 2, 4})
	out, err := (&Bayes{AutoCores: 2}).Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 7, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, sg := range out {
		reasons = append(reasons, sg.Reason)
		want := int64(1)
		if sg.Reason == "tf-defaults-auto" {
			want = 2
		}
		if sg.Reason != "space-filling" && sg.Reason != "recipe" && s.value(sg.Config, InterOpParallelism) != want {
			t.Errorf("auto_cores 2: %s start %s, want inter-op %d", sg.Reason, sg.Config, want)
		}
	}
	// (No split-small here: with TF's 8 gRPC threads its point is one of
	// the splits.)
	if diff := cmp.Diff([]string{"split", "split", "split", "tf-defaults-nearest", "tf-defaults-auto", "recipe", "space-filling"}, reasons); diff != "" {
		t.Errorf("auto_cores 2: design reasons (-want +got):\n%s", diff)
	}
	// auto_cores 3: the splits at the core count, TF's defaults both ways.
	out, err = (&Bayes{AutoCores: 3}).Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 7, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	reasons = nil
	for _, sg := range out {
		reasons = append(reasons, sg.Reason)
		want := map[string]int64{"split": 2, "tf-defaults-nearest": 1, "tf-defaults-auto": 2}[sg.Reason]
		if want != 0 && s.value(sg.Config, InterOpParallelism) != want {
			t.Errorf("auto_cores 3: %s start %s, want inter-op %d", sg.Reason, sg.Config, want)
		}
	}
	// (No recipe either: at the core count Split(1) is the recipe's point.)
	if diff := cmp.Diff([]string{"split", "split", "split", "tf-defaults-nearest", "tf-defaults-auto", "space-filling", "space-filling"}, reasons); diff != "" {
		t.Errorf("auto_cores 3: design reasons (-want +got):\n%s", diff)
	}
	// auto_cores 4: Split(1) both ways, then the reading whose Split(1)
	// measured higher for the other splits and the TF-defaults start.
	for _, coresWin := range []bool{false, true} {
		var hist []Trial
		reasons = nil
		for len(hist) < 6 {
			sugg, err := (&Bayes{AutoCores: 4}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
			if err != nil || len(sugg) != 1 {
				t.Fatalf("auto_cores 4 after %d trials: %v, %v", len(hist), sugg, err)
			}
			sg := sugg[0]
			reasons = append(reasons, sg.Reason)
			inter := s.value(sg.Config, InterOpParallelism)
			want := map[int]int64{0: 1, 1: 2}[len(hist)] // the two readings
			if len(hist) >= 2 && (sg.Reason == "split" || sg.Reason == "tf-defaults-nearest") {
				want = 1
				if coresWin {
					want = 2
				}
			}
			if want != 0 && inter != want {
				t.Errorf("auto_cores 4, cores win %v: trial %d (%s) %s runs inter-op %d, want %d", coresWin, len(hist)+1, sg.Reason, sg.Config, inter, want)
			}
			tr := toyTrial(s, sg.Config)
			if len(hist) < 2 && (inter == 2) == coresWin {
				tr.Value *= 1.1 // this reading measures higher
			}
			hist = append(hist, tr)
		}
		// (No recipe: at the core count Split(1) is the recipe's point.)
		wantReasons := []string{"split", "split-cores", "split", "split", "tf-defaults-nearest", "local-fill: neighbourhood"}
		if diff := cmp.Diff(wantReasons, reasons); diff != "" {
			t.Errorf("auto_cores 4, cores win %v: design reasons (-want +got):\n%s", coresWin, diff)
		}
	}
	// auto_cores 5: Split(2) before the second reading, the readings
	// compared on what they measured, Split(2) again at the core count
	// where it wins. Both Split(1)s break the SLO here, the core count's
	// by more but at a higher throughput: it wins under 5 and loses under
	// 4, which ranks by the margin.
	// A feasible Split(1) beats one over the SLO, however fast.
	for _, tc := range []struct {
		mode         int
		snappedMeets bool
	}{{4, false}, {5, false}, {5, true}} {
		mode := tc.mode
		var hist []Trial
		var got []string
		for len(hist) < 6 {
			sugg, err := (&Bayes{AutoCores: mode}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
			if err != nil || len(sugg) != 1 {
				t.Fatalf("auto_cores %d after %d trials: %v, %v", mode, len(hist), sugg, err)
			}
			sg := sugg[0]
			got = append(got, fmt.Sprintf("%s/%d/%d", sg.Reason, s.value(sg.Config, NumBatchThreads), s.value(sg.Config, InterOpParallelism)))
			tr := toyTrial(s, sg.Config)
			if sg.Reason == "split-cores" || len(hist) == 0 && !tc.snappedMeets {
				tr.Feasible, tr.P99 = false, 150*time.Millisecond
				if sg.Reason == "split-cores" {
					tr.P99, tr.Value, tr.QPS = 190*time.Millisecond, 2*tr.Value, 2*tr.QPS
				}
			}
			hist = append(hist, tr)
		}
		want := []string{"split/1/1", "split-cores/1/2", "split/2/1", "split/4/1", "tf-defaults-nearest/2/1"}
		switch {
		case tc.snappedMeets:
			want = []string{"split/1/1", "split/2/1", "split-cores/1/2", "split/4/1", "tf-defaults-nearest/2/1"}
		case mode == 5:
			want = []string{"split/1/1", "split/2/1", "split-cores/1/2", "split/2/2", "split/4/2", "tf-defaults-nearest/2/2"}
		}
		if diff := cmp.Diff(want, got[:len(want)]); diff != "" {
			t.Errorf("auto_cores %d, snapped Split(1) feasible %v: design (reason/batch threads/inter-op) (-want +got):\n%s", mode, tc.snappedMeets, diff)
		}
	}
	// Where the space holds auto itself, or the study has no splits, there
	// is nothing to read: auto_cores 4 runs the default's starts.
	for _, tc := range []struct {
		inter []int64
		obj   Objective
	}{
		{[]int64{0, 1, 4}, throughput},
		{[]int64{1, 2, 4}, Objective{Kind: MinLatency, Rate: 1000, ErrorBudget: 0.01}},
	} {
		sp := build(tc.inter)
		def, err := (&Bayes{}).Suggest(t.Context(), Request{Space: sp, Objective: tc.obj, N: 7, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []int{4, 5} {
			got, err := (&Bayes{AutoCores: mode}).Suggest(t.Context(), Request{Space: sp, Objective: tc.obj, N: 7, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(def, got); diff != "" {
				t.Errorf("auto_cores %d, inter-op %v, %v: design differs from the default's (-default +got):\n%s", mode, tc.inter, tc.obj.Kind, diff)
			}
		}
	}
	if c := build([]int64{1, 2, 4}).Defaults(); build([]int64{1, 2, 4}).value(c, InterOpParallelism) != 1 {
		t.Errorf("Defaults() = %s: want the space's smallest inter-op value, as before", c)
	}
}

// By default (local_fill 0 or 1) the initial design's slots after the
// known starts go in turn to hill-climbing's step from the history so far
// (the step first) and to a Halton point; with local_fill -1 every such
// slot is a Halton point, with 2 every one a hill-climbing step, and with
// 3 a step that climbed is followed by another.
func TestBayesLocalFillTakesTurnsInTheDesign(t *testing.T) {
	s := conformanceSpace(t)
	for _, mode := range []int{0, -1, 2, 3} {
		b := &Bayes{LocalFill: mode, Init: 12, Structure: -1} // two starts, so ten slots to fill
		var hist []Trial
		var filled []string
		climbed := map[int]bool{} // slots whose step raised the best by 1%
		for len(hist) < 12 {
			req := Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 3}
			sugg, err := b.Suggest(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(sugg) != 1 {
				t.Fatalf("local_fill %d: got %d suggestions after %d trials, want 1", mode, len(sugg), len(hist))
			}
			switch r := sugg[0].Reason; {
			case strings.HasPrefix(r, "local-fill: "):
				hc, err := (&HillClimb{}).Suggest(t.Context(), req)
				if err != nil || len(hc) != 1 || hc[0].Config.Key() != sugg[0].Config.Key() {
					t.Errorf("after %d trials the local fill ran %s; hill-climbing would run %+v (%v)", len(hist), sugg[0].Config, hc, err)
				}
				filled = append(filled, "local")
			case r == "space-filling":
				filled = append(filled, "halton")
			}
			tr := toyTrial(s, sugg[0].Config)
			if strings.HasPrefix(sugg[0].Reason, "local-fill: ") && raisedBest(throughput, hist, tr) {
				climbed[len(filled)-1] = true
			}
			hist = append(hist, tr)
		}
		if len(filled) < 2 {
			t.Fatalf("local_fill %d: %d space-filling slots in the design, want 2 or more", mode, len(filled))
		}
		for i, f := range filled {
			want := "halton"
			switch {
			case mode == 2, mode >= 0 && i == 0:
				want = "local"
			case mode == 0:
				if i%2 == 0 {
					want = "local"
				}
			case mode == 3:
				if filled[i-1] == "halton" || climbed[i-1] {
					want = "local"
				}
			}
			if f != want {
				t.Errorf("local_fill %d: slot %d is %s, want %s (slots %v)", mode, i, f, want, filled)
			}
		}
	}
}

// With local_fill 3 a design slot after a hill-climbing step that raised
// the best feasible objective by 1% or more is another step; after one that
// did not, or with local_fill 0, it is a Halton point.
func TestBayesLocalFillClimbsAgain(t *testing.T) {
	s := conformanceSpace(t)
	b := &Bayes{Structure: -1}
	starts := b.starts(Request{Space: s, Objective: throughput})
	var hist []Trial
	for _, a := range starts {
		tr := toyTrial(s, a.Config)
		tr.Value, tr.QPS = 1000, 1000
		hist = append(hist, tr)
	}
	step := func(qps float64) []Trial {
		tr := toyTrial(s, s.configAt([]int{1, 1, 1, 1, 0, 0})) // none of the starts
		tr.Value, tr.QPS = qps, qps
		return append(slices.Clone(hist), tr)
	}
	for _, tc := range []struct {
		mode int
		qps  float64
		want bool
	}{
		{3, 2000, true}, {3, 1005, false}, {0, 2000, false}, {2, 1005, true},
	} {
		b := &Bayes{Structure: -1, LocalFill: tc.mode}
		if got := b.localFillTurn(Request{Space: s, Objective: throughput, History: step(tc.qps)}); got != tc.want {
			t.Errorf("local_fill %d after a step to %v req/s from 1000: a step next is %v, want %v", tc.mode, tc.qps, got, tc.want)
		}
	}
}

// With local_fill 4 every design slot is a hill-climbing step where the
// structural starts ran (a closed-loop throughput study), and the slots
// take turns where they did not (no rows in flight known).
func TestBayesLocalFillStepsOnlyAfterTheSplits(t *testing.T) {
	for _, tc := range []struct {
		inFlight int
		mode     int
		want     bool
	}{
		{32, 4, true}, {0, 4, false}, {32, 0, false},
	} {
		s := demoLikeSpace(t, tc.inFlight)
		b := &Bayes{LocalFill: tc.mode}
		var hist []Trial
		for _, a := range b.starts(Request{Space: s, Objective: throughput}) {
			hist = append(hist, Trial{Config: a.Config, Outcome: Succeeded, Measured: true, Value: 1000, QPS: 1000, P99: time.Millisecond, Feasible: true})
		}
		if tc.inFlight > 0 && len(hist) < 4 {
			t.Fatalf("%d rows in flight: %d starts, want the splits among them", tc.inFlight, len(hist))
		}
		hist = append(hist, Trial{Config: s.configAt([]int{2, 2, 2, 2, 0}), Outcome: Succeeded, Measured: true, Value: 900, QPS: 900, P99: time.Millisecond, Feasible: true})
		if got := b.localFillTurn(Request{Space: s, Objective: throughput, History: hist}); got != tc.want {
			t.Errorf("local_fill %d, %d rows in flight, after one step: a step next is %v, want %v", tc.mode, tc.inFlight, got, tc.want)
		}
	}
}

// fit_defaults 1 cuts the TF-defaults start's max_batch_size to the rows
// it can have in the server: with 32 rows in flight and grpc_max_threads
// 8 (TF's defaults snapped into the demo-like space), batches of 8 at
// most; the other parameters stay TF's.
func TestFittedDefaults(t *testing.T) {
	s := demoLikeSpace(t, 32)
	d := s.Defaults()
	f := s.fittedDefaults(false)
	if s.value(d, MaxBatchSize) != 64 || s.value(d, GRPCMaxThreads) != 8 {
		t.Fatalf("defaults %s: want max_batch_size 64 and grpc_max_threads 8 for this test to mean anything", d)
	}
	for _, p := range s.Params() {
		want := s.value(d, p.Name)
		if p.Name == MaxBatchSize {
			want = 8
		}
		if got := s.value(f, p.Name); got != want {
			t.Errorf("fitted defaults %s: %s = %d, want %d", f, p.Name, got, want)
		}
	}
	b := &Bayes{FitDefaults: 1}
	var reasons []string
	for _, a := range b.starts(Request{Space: s, Objective: throughput}) {
		reasons = append(reasons, a.Reason)
		if a.Reason == "tf-defaults-fitted" && !a.Config.Equal(f) {
			t.Errorf("start %s, want the fitted defaults %s", a.Config, f)
		}
	}
	if !slices.Contains(reasons, "tf-defaults-fitted") || slices.Contains(reasons, "tf-defaults-nearest") {
		t.Errorf("fit_defaults 1: starts %v, want the fitted defaults in place of the nearest", reasons)
	}
}

// With race 1 the design's first slot is the first known start, its second
// the recipe, and every later slot goes to the arm holding the best trial
// so far: hill-climbing's step from the history where the recipe leads,
// the next start where a start does (and, once the starts ran out, the
// design's other slots).
func TestBayesRaceGivesEachSlotToTheLeadingArm(t *testing.T) {
	s := demoLikeSpace(t, 32)
	rec := s.Recipe()
	b := &Bayes{Race: 1}
	starts := b.starts(Request{Space: s, Objective: throughput})
	var others []Config // the starts other than the recipe, in order
	for _, a := range starts {
		if !a.Config.Equal(rec) && !slices.ContainsFunc(others, a.Config.Equal) {
			others = append(others, a.Config)
		}
	}
	if len(others) < 4 {
		t.Fatalf("%d starts besides the recipe, want the splits and TF's defaults", len(others))
	}
	for _, lead := range []string{"recipe", "start"} {
		var hist []Trial
		for len(hist) < 8 {
			req := Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 5}
			sugg, err := b.Suggest(t.Context(), req)
			if err != nil || len(sugg) != 1 {
				t.Fatalf("%s leads, after %d trials: %v, %v", lead, len(hist), sugg, err)
			}
			got := sugg[0]
			switch k := len(hist); {
			case k == 0:
				if !got.Config.Equal(others[0]) {
					t.Errorf("%s leads: slot 0 is %s (%s), want the first start %s", lead, got.Config, got.Reason, others[0])
				}
			case k == 1:
				if !got.Config.Equal(rec) {
					t.Errorf("%s leads: slot 1 is %s (%s), want the recipe %s", lead, got.Config, got.Reason, rec)
				}
			case lead == "recipe":
				hc, err := (&HillClimb{}).Suggest(t.Context(), req)
				if err != nil || len(hc) != 1 || !hc[0].Config.Equal(got.Config) || !strings.HasPrefix(got.Reason, "race-climb: ") {
					t.Errorf("recipe leads: slot %d is %s (%s), want hill-climbing's step %+v (%v)", k, got.Config, got.Reason, hc, err)
				}
			case k < len(others)+1:
				if !got.Config.Equal(others[k-1]) {
					t.Errorf("a start leads: slot %d is %s (%s), want the next start %s", k, got.Config, got.Reason, others[k-1])
				}
			default:
				if strings.HasPrefix(got.Reason, "race-climb: ") {
					t.Errorf("a start leads: slot %d is hill-climbing's (%s), want the design's own slot", k, got.Reason)
				}
			}
			tr := Trial{Config: got.Config, Outcome: Succeeded, Measured: true, Value: 1000, QPS: 1000, P99: time.Millisecond, Feasible: true}
			if (lead == "recipe" && got.Config.Equal(rec)) || (lead == "start" && got.Config.Equal(others[0])) {
				tr.Value, tr.QPS = 2000, 2000
			}
			hist = append(hist, tr)
		}
		arms, _ := raceArms(Request{Space: s, Objective: throughput, History: hist})
		want := armClimb
		if lead == "start" {
			want = armStarts
		}
		for k, a := range arms {
			if k >= 2 && a != want {
				t.Errorf("%s leads: trial %d labelled arm %d, want %d (%v)", lead, k, a, want, arms)
			}
		}
	}
	off := &Bayes{}
	sugg, err := off.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: []Trial{{Config: others[0], Outcome: Succeeded, Measured: true, Value: 1, QPS: 1, P99: time.Millisecond, Feasible: true}}, N: 1, Seed: 5})
	if err != nil || len(sugg) != 1 || sugg[0].Config.Equal(rec) {
		t.Errorf("race off: slot 1 is %+v (%v), want the next start, not the recipe", sugg, err)
	}
}

// Race keeps the strategies' contract (points of the space, hard rules
// kept, no configuration twice, a reason each) through and past the
// design, one at a time and in batches (which race leaves to the design
// as it is), on a space with the structural starts and on one without.
func TestBayesRaceKeepsTheContract(t *testing.T) {
	for _, s := range []*Space{demoLikeSpace(t, 32), conformanceSpace(t)} {
		for _, n := range []int{1, 3} {
			if hist := run(t, &Bayes{Race: 1, FitMax: 40}, s, 7, n, 15); len(hist) != 15 {
				t.Errorf("race, %d at a time: %d trials, want 15", n, len(hist))
			}
		}
	}
}

// TestHoldInput: the share of the rows in the server that the running and
// queued batches hold, 1 when they hold every row, less on a log scale
// when the queue turns requests away, and no input without a closed-loop
// load; Bayes.QueueInput appends it to the models' inputs.
func TestHoldInput(t *testing.T) {
	s := demoLikeSpace(t, 64)
	at := func(mbs, threads, queue, grpc int) float64 {
		t.Helper()
		c := cfg(MaxBatchSize, mbs, BatchTimeoutMicros, 1000, NumBatchThreads, threads, MaxEnqueuedBatches, queue, GRPCMaxThreads, grpc)
		h, ok := s.holdInput(c.Get)
		if !ok {
			t.Fatalf("holdInput(%s) does not apply under a closed-loop load", c)
		}
		return h
	}
	if h := at(16, 2, 4, 64); h != 1 { // (4 + 2) x 16 = 96 >= 64 rows
		t.Errorf("a queue that holds every row reads %v, want 1", h)
	}
	if h := at(4, 4, 4, 64); !(h > 0 && h < 1) { // (4 + 4) x 4 = 32 of 64 rows
		t.Errorf("a queue that holds half the rows reads %v, want between 0 and 1", h)
	}
	if h, half := at(4, 4, 4, 8), at(4, 4, 4, 64); h != 1 || half >= 1 {
		t.Errorf("with grpc_max_threads 8 only 8 rows are in the server: reads %v (want 1), at 64 threads %v", h, half)
	}
	if lo, hi := at(4, 1, 4, 64), at(4, 4, 4, 64); !(lo < hi) {
		t.Errorf("fewer rows held must read lower: 20 rows %v, 32 rows %v", lo, hi)
	}
	if _, ok := demoLikeSpace(t, 0).holdInput(cfg(MaxBatchSize, 4).Get); ok {
		t.Error("holdInput applies without a closed-loop load, whose rows in the server are unknown")
	}
	c := cfg(MaxBatchSize, 4, BatchTimeoutMicros, 1000, NumBatchThreads, 4, MaxEnqueuedBatches, 4, GRPCMaxThreads, 64)
	plain, _ := (&Bayes{}).inputs(s, c)
	with, _ := (&Bayes{QueueInput: 1}).inputs(s, c)
	if len(with) != len(plain)+1 || with[len(with)-1] != at(4, 4, 4, 64) {
		t.Errorf("QueueInput's inputs %v, want %v and the hold input", with, plain)
	}
}
