package search

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/gonum/mat"

	"github.com/batchtune/batchtune/configs"
)

func TestNewParsesSettings(t *testing.T) {
	tests := []struct {
		name     string
		strategy string
		settings map[string]string
		want     Strategy
		problems []string // field paths; nil when New succeeds
	}{
		// Plain names with no settings.
		{"grid", "grid", nil, &Grid{}, nil},
		{"random", "random", map[string]string{}, &Random{}, nil},
		// Settings land in the struct.
		{"bayes settings", "bayes", map[string]string{"init": "6", "xi": "0.05", "prior_strength": "-1", "candidates": "512", "fit_max": "60"},
			&Bayes{Init: 6, Xi: 0.05, PriorStrength: -1, Candidates: 512, FitMax: 60}, nil},
		{"hillclimb settings", "hillclimb", map[string]string{"radius": "2", "min_initialized": "4", "magnitude": "1.5"},
			&HillClimb{Radius: 2, MinInitialized: 4, Magnitude: 1.5}, nil},
		// Unknown settings are errors (katib's Validate), sorted by name; a
		// malformed number is named too.
		{"unknown settings", "grid", map[string]string{"zeta": "1", "alpha": "2"}, nil,
			[]string{"search.settings.alpha", "search.settings.zeta"}},
		{"bad number", "bayes", map[string]string{"init": "eight", "xi": "x"}, nil,
			[]string{"search.settings.init", "search.settings.xi"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := New(tc.strategy, tc.settings)
			if tc.problems != nil {
				if diff := cmp.Diff(tc.problems, problemFields(err)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(Bayes{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := New("annealing", nil); !errors.Is(err, ErrUnknownStrategy) {
		t.Errorf("New(annealing) err = %v, want ErrUnknownStrategy", err)
	}
}

func TestHillClimbValidate(t *testing.T) {
	err := (&HillClimb{Radius: 9, MinInitialized: -1, Magnitude: math.Inf(1)}).Validate(nil)
	want := []string{"search.settings.radius", "search.settings.min_initialized", "search.settings.magnitude"}
	if diff := cmp.Diff(want, problemFields(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := (&HillClimb{}).Validate(nil); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// TestHaltonPrefixIsStable: the sequence does not depend on how many points
// are drawn, so consecutive calls continue it.
func TestHaltonPrefixIsStable(t *testing.T) {
	a := haltonPoints(42, 16, 3)
	b := haltonPoints(42, 200, 3)
	if !mat.Equal(a, b.Slice(0, 16, 0, 3)) {
		t.Error("the first 16 of 200 points differ from 16 points drawn alone")
	}
	c := haltonPoints(43, 16, 3)
	if mat.Equal(a, c) {
		t.Error("seeds 42 and 43 scramble the same way")
	}
}

// TestRandomStratifies: a base-2 Halton coordinate puts its first 2^k
// points one in each of 2^k equal cells, so 8 values are covered by the
// first 8 suggestions — far better than independent draws (which miss one
// or more of 8 values in 8 draws with probability 0.997).
func TestRandomStratifies(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxEnqueuedBatches, Min: i64(1), Max: i64(8)},
		{Name: NumBatchThreads, Min: i64(1), Max: i64(9)},
	}, rules60)
	for seed := range uint64(5) {
		sugg, err := (&Random{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 8, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, sg := range sugg {
			v, _ := sg.Config.Get(MaxEnqueuedBatches)
			got = append(got, v)
		}
		slices.Sort(got)
		if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6, 7, 8}, got); diff != "" {
			t.Errorf("seed %d: first coordinate of 8 suggestions (-want +got):\n%s", seed, diff)
		}
	}
}

// TestRandomContinuesTheSequence: n suggestions at once equal one at a time
// with the earlier ones in the history.
func TestRandomContinuesTheSequence(t *testing.T) {
	s := conformanceSpace(t)
	all, err := (&Random{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 6, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var hist []Trial
	for i := range 6 {
		one, err := (&Random{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !one[0].Config.Equal(all[i].Config) {
			t.Fatalf("call %d gave %v, the batch had %v", i, one[0].Config, all[i].Config)
		}
		hist = append(hist, toyTrial(s, one[0].Config))
	}
}

func TestGridOrder(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Values: []int64{8, 16}},
		{Name: BatchTimeoutMicros, Values: []int64{0, 1000, 90000}},
	}, rules60)
	sugg, err := (&Grid{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got []Config
	for _, sg := range sugg {
		got = append(got, sg.Config)
	}
	// The last declared parameter varies fastest; 90000 µs breaks SLO/3.
	want := []Config{
		cfg(MaxBatchSize, 8, BatchTimeoutMicros, 0), cfg(MaxBatchSize, 8, BatchTimeoutMicros, 1000),
		cfg(MaxBatchSize, 16, BatchTimeoutMicros, 0), cfg(MaxBatchSize, 16, BatchTimeoutMicros, 1000),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestHillClimbFollowsQuickSearch walks the first steps on a toy whose
// throughput rises with max_batch_size and threads.
func TestHillClimbFollowsQuickSearch(t *testing.T) {
	s := conformanceSpace(t)
	h := &HillClimb{}
	var hist []Trial
	var reasons []string
	for range 8 {
		sugg, err := h.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, sugg[0].Reason)
		hist = append(hist, toyTrial(s, sugg[0].Config))
	}
	// It starts at the recipe, then measures neighbours.
	if !hist[0].Config.Equal(s.Recipe()) {
		t.Errorf("first trial %v, want the recipe %v", hist[0].Config, s.Recipe())
	}
	if diff := cmp.Diff([]string{"start (recipe)", "neighbourhood", "neighbourhood"}, reasons[:3]); diff != "" {
		t.Errorf("first reasons (-want +got):\n%s", diff)
	}
	best := slices.MaxFunc(hist, func(a, b Trial) int {
		if !a.Feasible {
			return -1
		}
		if !b.Feasible {
			return 1
		}
		return cmpFloat(a.Value, b.Value)
	})
	if best.Value < 2*hist[0].Value {
		t.Errorf("after 8 trials the best is %.0f QPS, less than twice the start's %.0f", best.Value, hist[0].Value)
	}
}

// TestHillClimbSteps: with enough of a neighbourhood measured, it steps
// from the centre towards the objective-weighted centre, magnitude times.
func TestHillClimbSteps(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(1), Max: i64(256), Scale: configs.ScalePow2}, // 9 values
		{Name: NumBatchThreads, Min: i64(1), Max: i64(8)},
	}, rules60)
	at := func(bi, n int) Config { return cfg(MaxBatchSize, 1<<bi, NumBatchThreads, n) }
	meas := func(c Config, v float64) Trial {
		return Trial{Config: c, Outcome: Succeeded, Measured: true, Value: v, Feasible: true}
	}
	// Home (2^3, 4) is the best; its neighbours say "larger batches,
	// more threads".
	hist := []Trial{
		meas(at(3, 4), 100), meas(at(2, 4), 10), meas(at(3, 3), 40), meas(at(3, 5), 60),
	}
	sugg, err := (&HillClimb{Radius: 1, MinInitialized: 4, Magnitude: 3}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Centre (2.75, 4) in (batch index, threads); weighted centre
	// (2.95, 4.10); step × 3 = (+0.61, +0.29) → (3.61, 4.29) → (4, 4).
	if want := at(4, 4); !sugg[0].Config.Equal(want) || sugg[0].Reason != "step" {
		t.Errorf("got %v (%s), want a step to %v", sugg[0].Config, sugg[0].Reason, want)
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestHillClimbRestartsWhenEveryNeighbourhoodIsDone(t *testing.T) {
	// One parameter, radius 1. Values 1, 2, 3 ran and 4 was rejected:
	// every measured point's neighbourhood is used up, so the climb
	// restarts at a quasi-random point.
	s := mustSpace(t, configs.SpaceSpec{{Name: MaxEnqueuedBatches, Min: i64(1), Max: i64(40)}}, rules60)
	all, _ := s.Runnable(t.Context())
	var hist []Trial
	for _, c := range all[:3] {
		hist = append(hist, Trial{Config: c, Outcome: Succeeded, Measured: true, Value: 10, Feasible: true})
	}
	hist = append(hist, Trial{Config: all[3], Outcome: Rejected})
	sugg, err := (&HillClimb{Radius: 1}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sugg[0].Reason != "restart" {
		t.Fatalf("got %v (%s), want a restart", sugg[0].Config, sugg[0].Reason)
	}
	if v, _ := sugg[0].Config.Get(MaxEnqueuedBatches); v <= 4 {
		t.Errorf("restart at %d, which was already run or rejected", v)
	}
	// The second pick grows a neighbourhood around the restart.
	if sugg[1].Reason != "neighbourhood" {
		t.Errorf("second pick %v (%s), want a neighbour of the restart", sugg[1].Config, sugg[1].Reason)
	}
}

func TestStopRule(t *testing.T) {
	e := func(v float64) *float64 { return &v }
	ok := Trial{Outcome: Succeeded, Feasible: true, Measured: true}
	small := ok
	small.Expected = e(0.001)
	big := ok
	big.Expected = e(0.2)
	rejected := Trial{Outcome: Rejected}
	tests := []struct {
		name string
		rule StopRule
		hist []Trial
		stop bool
	}{
		// Budget counts trials that ran, not rejections.
		{"budget reached", StopRule{Budget: 3}, []Trial{ok, ok, rejected, ok}, true},
		{"budget not reached", StopRule{Budget: 3}, []Trial{ok, rejected, ok, rejected}, false},
		// Five small expectations in a row.
		{"patience", DefaultStopRule(0), []Trial{big, small, small, small, small, small}, true},
		// Four are not enough; a rejection between them does not count.
		{"four small", DefaultStopRule(0), []Trial{big, small, small, rejected, small, small}, false},
		// A large expectation in the window resets it.
		{"reset", DefaultStopRule(0), []Trial{small, small, small, big, small, small, small, small}, false},
		// Without a feasible trial there is nothing to improve on.
		{"nothing feasible", DefaultStopRule(0), func() []Trial {
			var h []Trial
			for range 6 {
				tr := small
				tr.Feasible = false
				h = append(h, tr)
			}
			return h
		}(), false},
		// A model-free strategy's trials carry no expectation.
		{"no expectations", DefaultStopRule(0), []Trial{ok, ok, ok, ok, ok, ok}, false},
		// An empty history never stops (no budget).
		{"empty", DefaultStopRule(0), nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stop, why := tc.rule.Stop(tc.hist)
			if stop != tc.stop {
				t.Errorf("Stop = %v (%q), want %v", stop, why, tc.stop)
			}
			if stop && why == "" {
				t.Error("stopped without a reason")
			}
		})
	}
	bad := StopRule{Budget: -1, Patience: 2, MinImprovement: 0}
	if diff := cmp.Diff([]string{"search.stop.budget", "search.stop.min_improvement"}, problemFields(bad.Validate())); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}

func TestMargin(t *testing.T) {
	slo := 50 * time.Millisecond
	thr := Objective{Kind: MaxThroughput, ErrorBudget: 0.01}
	lat := Objective{Kind: MinLatency, ErrorBudget: 0.01, Rate: 1000}
	capa := Objective{Kind: MaxCapacity, ErrorBudget: 0.01}
	tests := []struct {
		name string
		o    Objective
		t    Trial
		want float64
		ok   bool
	}{
		// log(P99/SLO) when latency binds.
		{"feasible", thr, Trial{Outcome: Succeeded, Feasible: true, P99: 25 * time.Millisecond}, math.Log(0.5), true},
		{"too slow", thr, Trial{Outcome: Succeeded, P99: 100 * time.Millisecond}, math.Log(2), true},
		// The error budget binds: (0.05 - 0.01) / 0.01 = 4, clipped to 2.
		{"errors", thr, Trial{Outcome: Succeeded, P99: 10 * time.Millisecond, ErrorRate: 0.05}, 2, true},
		// The verdict wins over a margin of the wrong sign (kept at ±0.05).
		{"verdict infeasible", thr, Trial{Outcome: Succeeded, P99: 40 * time.Millisecond}, 0.05, true},
		{"verdict feasible", thr, Trial{Outcome: Succeeded, Feasible: true, P99: 51 * time.Millisecond}, -0.05, true},
		// Early stop: what it saw.
		{"early stopped", thr, Trial{Outcome: EarlyStopped, P99: 75 * time.Millisecond}, math.Log(1.5), true},
		// Failure: clearly infeasible.
		{"failed", thr, Trial{Outcome: Failed}, failedMargin, true},
		// min_latency: the rate binds, and the SLO as for every objective.
		{"rate missed", lat, Trial{Outcome: Succeeded, QPS: 800, P99: 10 * time.Millisecond}, math.Log(1000.0 / 800), true},
		{"rate met", lat, Trial{Outcome: Succeeded, Feasible: true, QPS: 1000, P99: 10 * time.Millisecond}, -0.05, true},
		{"rate met, too slow", lat, Trial{Outcome: Succeeded, QPS: 1000, P99: 100 * time.Millisecond}, math.Log(2), true},
		{"rate missed, slower still", lat, Trial{Outcome: Succeeded, QPS: 800, P99: 150 * time.Millisecond}, math.Log(3), true},
		// max_capacity: the knee's P99 (feasible: capacity > 0), or the
		// lowest rate's when no rate met the SLO.
		{"capacity found", capa, Trial{Outcome: Succeeded, Feasible: true, Value: 900, Measured: true, P99: 40 * time.Millisecond}, math.Log(0.8), true},
		{"no rate met", capa, Trial{Outcome: Succeeded, Value: 0, Measured: true, P99: 150 * time.Millisecond}, math.Log(3), true},
		// No information.
		{"rejected", thr, Trial{Outcome: Rejected}, 0, false},
		{"invalid", thr, Trial{Outcome: Invalid}, 0, false},
		{"interrupted", thr, Trial{Outcome: Interrupted}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := margin(tc.o, slo, tc.t)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("margin = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestOutcomeAndObjectiveText(t *testing.T) {
	for o := Succeeded; o <= Interrupted; o++ {
		b, err := o.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Outcome
		if err := back.UnmarshalText(b); err != nil || back != o {
			t.Errorf("%v → %q → %v, %v", o, b, back, err)
		}
	}
	if _, err := Outcome(0).MarshalText(); err == nil {
		t.Error("the zero Outcome marshalled")
	}
	tr := Trial{Config: cfg(MaxBatchSize, 8), Outcome: EarlyStopped, P99: time.Millisecond}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var back Trial
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tr, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s\n%s", diff, b)
	}
	for _, k := range []ObjectiveKind{MaxThroughput, MinLatency} {
		b, _ := k.MarshalText()
		var back ObjectiveKind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("%v → %q → %v, %v", k, b, back, err)
		}
	}
	if (Objective{Kind: MinLatency}).Direction() != Minimize || (Objective{Kind: MaxThroughput}).Direction() != Maximize {
		t.Error("directions wrong")
	}
	bad := Objective{Kind: MinLatency, ErrorBudget: 1.5}
	if diff := cmp.Diff([]string{"objective.error_budget", "objective.rate"}, problemFields(bad.Validate())); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}
