package search

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
)

// strategies is every Strategy the conformance suite runs over, with
// settings that keep the Bayesian one quick on these small spaces.
func strategies() []Strategy {
	return []Strategy{&Grid{}, &Random{}, &HillClimb{}, &Bayes{Init: 3, FitMax: 40}}
}

var throughput = Objective{Kind: MaxThroughput, ErrorBudget: 0.01}

// conformanceSpace is a 6-parameter space with 4×5×3×3×2×2 = 720 points
// under a 30 ms SLO, which rules out the two longest timeouts.
func conformanceSpace(t testing.TB) *Space {
	return mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(8), Max: i64(64), Scale: configs.ScalePow2},
		{Name: BatchTimeoutMicros, Values: []int64{0, 2000, 5000, 10000, 20000}},
		{Name: NumBatchThreads, Values: []int64{1, 2, 4}},
		{Name: MaxEnqueuedBatches, Values: []int64{4, 16, 64}},
		{Name: IntraOpParallelism, Values: []int64{0, 2}},
		{Name: InterOpParallelism, Values: []int64{0, 2}},
	}, Rules{SLO: 30 * time.Millisecond, Cores: 2, GPUs: 1})
}

// toyTrial answers a configuration with a smooth made-up measurement
// (TEST FIXTURE: a closed-form toy, not a model of any server): throughput
// grows with batch size and threads, P99 with the timeout; batch 64 with 4
// threads fails to load.
func toyTrial(s *Space, c Config) Trial {
	get := func(name string) float64 { v, _ := c.Get(name); return float64(v) }
	b, tau, n := get(MaxBatchSize), get(BatchTimeoutMicros)/1000, get(NumBatchThreads)
	if b*n >= 256 {
		return Trial{Config: c, Outcome: Failed}
	}
	qps := 1000 * math.Log2(b+1) * math.Sqrt(n)
	p99 := time.Duration((4 + 1.2*tau + b/8) * float64(time.Millisecond))
	ok := p99 <= s.rules.SLO
	return Trial{Config: c, Outcome: Succeeded, Measured: true, Value: qps, QPS: qps, P99: p99, Feasible: ok}
}

// run asks st for suggestions n at a time and answers them with toyTrial,
// until budget trials or the space runs out. It fails the test on any
// suggestion that breaks the contract.
func run(t *testing.T, st Strategy, s *Space, seed uint64, n, budget int) []Trial {
	t.Helper()
	var hist []Trial
	seen := map[string]bool{}
	for len(hist) < budget {
		sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: n, Seed: seed})
		if err != nil {
			t.Fatalf("Suggest after %d trials: %v", len(hist), err)
		}
		if len(sugg) > n {
			t.Fatalf("asked for %d, got %d", n, len(sugg))
		}
		if len(sugg) == 0 {
			break
		}
		for _, sg := range sugg {
			checkSuggestion(t, s, sg, seen)
			hist = append(hist, toyTrial(s, sg.Config))
		}
	}
	return hist
}

func checkSuggestion(t *testing.T, s *Space, sg Suggestion, seen map[string]bool) {
	t.Helper()
	if !s.Contains(sg.Config) {
		t.Fatalf("suggestion %v is not a point of the space", sg.Config)
	}
	if vs := s.Check(sg.Config); len(vs) > 0 {
		t.Fatalf("suggestion %v breaks a hard rule: %v", sg.Config, vs)
	}
	if seen[sg.Config.Key()] {
		t.Fatalf("suggestion %v repeats a configuration", sg.Config)
	}
	seen[sg.Config.Key()] = true
	if sg.Reason == "" {
		t.Errorf("suggestion %v has no reason", sg.Config)
	}
}

func TestConformance(t *testing.T) {
	for _, st := range strategies() {
		t.Run(st.Name(), func(t *testing.T) {
			t.Parallel()
			s := conformanceSpace(t)
			if err := st.Validate(s); err != nil {
				t.Fatalf("Validate: %v", err)
			}

			t.Run("empty history gives n valid distinct suggestions", func(t *testing.T) {
				sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 4, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(sugg) != 4 {
					t.Fatalf("got %d suggestions, want 4", len(sugg))
				}
				seen := map[string]bool{}
				for _, sg := range sugg {
					checkSuggestion(t, s, sg, seen)
				}
			})

			t.Run("same seed and history give the same suggestions", func(t *testing.T) {
				hist := run(t, st, s, 7, 2, 12)
				req := Request{Space: s, Objective: throughput, History: hist, N: 3, Seed: 7}
				a, err := st.Suggest(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := st.Suggest(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(a, b); diff != "" {
					t.Errorf("two identical requests differ (-first +second):\n%s", diff)
				}
				// A fresh, equal space and a copied history must agree too:
				// nothing may depend on state left behind by earlier calls.
				c, err := st.Suggest(t.Context(), Request{Space: conformanceSpace(t), Objective: throughput, History: append([]Trial(nil), hist...), N: 3, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(a, c); diff != "" {
					t.Errorf("an equal request on a fresh space differs (-first +fresh):\n%s", diff)
				}
			})

			t.Run("a study never repeats a finished configuration", func(t *testing.T) {
				hist := run(t, st, s, 3, 3, 30) // run checks every suggestion
				if len(hist) != 30 {
					t.Fatalf("study stopped after %d trials in a space of 432 runnable points", len(hist))
				}
			})

			t.Run("every finished outcome counts, an interrupted one does not", func(t *testing.T) {
				var hist []Trial
				outcomes := []Outcome{Succeeded, Failed, EarlyStopped, Rejected, Invalid}
				runnable, err := s.Runnable(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range runnable[:len(runnable)-3] {
					tr := toyTrial(s, c)
					tr.Outcome = outcomes[i%len(outcomes)]
					hist = append(hist, tr)
				}
				left := runnable[len(runnable)-3:]
				interrupted := Trial{Config: left[0], Outcome: Interrupted}
				hist = append(hist, interrupted)
				sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 10, Seed: 2})
				if err != nil {
					t.Fatal(err)
				}
				var got []Config
				for _, sg := range sugg {
					got = append(got, sg.Config)
				}
				// Only the three unfinished points may come back, each once.
				if len(got) != 3 {
					t.Fatalf("got %d suggestions %v, want the 3 unfinished points", len(got), got)
				}
				for _, c := range got {
					found := false
					for _, l := range left {
						found = found || l.Equal(c)
					}
					if !found {
						t.Errorf("suggested %v, which a finished trial ran", c)
					}
				}
			})

			t.Run("a history of only failures", func(t *testing.T) {
				var hist []Trial
				seen := map[string]bool{}
				sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 5, Seed: 4})
				if err != nil {
					t.Fatal(err)
				}
				for _, sg := range sugg {
					hist = append(hist, Trial{Config: sg.Config, Outcome: Failed})
					seen[sg.Config.Key()] = true
				}
				for range 3 {
					sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 2, Seed: 4})
					if err != nil {
						t.Fatal(err)
					}
					if len(sugg) != 2 {
						t.Fatalf("got %d suggestions after %d failures, want 2", len(sugg), len(hist))
					}
					for _, sg := range sugg {
						checkSuggestion(t, s, sg, seen)
						hist = append(hist, Trial{Config: sg.Config, Outcome: Failed})
					}
				}
			})

			t.Run("a single-point space", func(t *testing.T) {
				one := mustSpace(t, configs.SpaceSpec{
					{Name: MaxBatchSize, Values: []int64{32}},
					{Name: BatchTimeoutMicros, Values: []int64{1000}},
				}, rules60)
				sugg, err := st.Suggest(t.Context(), Request{Space: one, Objective: throughput, N: 3, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				want := cfg(MaxBatchSize, 32, BatchTimeoutMicros, 1000)
				if len(sugg) != 1 || !sugg[0].Config.Equal(want) {
					t.Fatalf("got %v, want exactly %v", sugg, want)
				}
				hist := []Trial{toyTrial(one, want)}
				sugg, err = st.Suggest(t.Context(), Request{Space: one, Objective: throughput, History: hist, N: 1, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(sugg) != 0 {
					t.Errorf("after the only point ran, got %v, want nothing", sugg)
				}
			})

			t.Run("the space runs out cleanly", func(t *testing.T) {
				small := mustSpace(t, configs.SpaceSpec{
					{Name: MaxBatchSize, Values: []int64{8, 16, 32}},
					{Name: BatchTimeoutMicros, Values: []int64{0, 1000, 90000}}, // 90000 breaks SLO/3
					{Name: NumBatchThreads, Values: []int64{1, 2}},
				}, rules60)
				hist := run(t, st, small, 5, 4, 100)
				if len(hist) != 12 {
					t.Errorf("ran %d trials, want all 12 runnable points", len(hist))
				}
			})

			t.Run("a cancelled context stops it", func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				hist := run(t, st, s, 9, 1, 10)
				_, err := st.Suggest(ctx, Request{Space: s, Objective: throughput, History: hist, N: 2, Seed: 9})
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			})

			t.Run("bad requests", func(t *testing.T) {
				for name, req := range map[string]Request{
					"no space":      {Objective: throughput, N: 1},
					"n zero":        {Space: s, Objective: throughput},
					"no objective":  {Space: s, N: 1},
					"rate-less p99": {Space: s, Objective: Objective{Kind: MinLatency}, N: 1},
				} {
					if _, err := st.Suggest(t.Context(), req); !errors.Is(err, ErrBadRequest) {
						t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
					}
				}
			})
		})
	}
}

// TestNoSuggestionBreaksSLOThird is the property: for random spaces,
// random SLOs and random histories, no strategy ever suggests a timeout at
// or above SLO/3.
func TestNoSuggestionBreaksSLOThird(t *testing.T) {
	cases := 40
	if testing.Short() {
		cases = 12
	}
	r := rand.New(rand.NewPCG(2024, 4))
	for i := range cases {
		spec, rules := randomSpace(r)
		s, err := NewSpace(spec, rules)
		if err != nil {
			// Every timeout may break the rule: NewSpace must say so.
			if !containsField(err, "space."+BatchTimeoutMicros) {
				t.Fatalf("case %d: NewSpace(%v, SLO %s) failed without naming the timeout: %v", i, spec, rules.SLO, err)
			}
			continue
		}
		for _, st := range strategies() {
			hist := randomHistory(r, s)
			sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1 + r.IntN(4), Seed: r.Uint64()})
			if err != nil {
				t.Fatalf("case %d %s: %v", i, st.Name(), err)
			}
			for _, sg := range sugg {
				if !sloThirdOK(sg.Config, rules.SLO) {
					t.Fatalf("case %d %s: suggested %v under SLO %s", i, st.Name(), sg.Config, rules.SLO)
				}
			}
		}
	}
}

// FuzzNoSuggestionBreaksSLOThird explores the same property with the
// fuzzer choosing the space, SLO and seed (the model-free strategies; the
// Bayesian one is covered by the property test above).
func FuzzNoSuggestionBreaksSLOThird(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(99), uint64(7))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		r := rand.New(rand.NewPCG(a, b))
		spec, rules := randomSpace(r)
		s, err := NewSpace(spec, rules)
		if err != nil {
			return
		}
		for _, st := range []Strategy{&Grid{}, &Random{}, &HillClimb{}} {
			sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: randomHistory(r, s), N: 3, Seed: a})
			if err != nil {
				t.Fatal(err)
			}
			for _, sg := range sugg {
				if !sloThirdOK(sg.Config, rules.SLO) {
					t.Fatalf("%s suggested %v under SLO %s", st.Name(), sg.Config, rules.SLO)
				}
			}
		}
	})
}

// sloThirdOK is the rule, restated independently of the package: the
// timeout in µs times 3 is below the SLO in µs (exact, in nanoseconds).
func sloThirdOK(c Config, slo time.Duration) bool {
	v, ok := c.Get(BatchTimeoutMicros)
	if !ok {
		return true
	}
	return time.Duration(v)*time.Microsecond*3 < slo
}

func containsField(err error, field string) bool {
	for _, f := range problemFields(err) {
		if f == field {
			return true
		}
	}
	return false
}

// randomSpace draws a space of 2 to 6 parameters with timeouts around a
// random SLO, so that some timeouts break SLO/3 and some do not.
func randomSpace(r *rand.Rand) (configs.SpaceSpec, Rules) {
	slo := time.Duration(1+r.IntN(200)) * time.Millisecond
	third := int64(slo / 3 / time.Microsecond)
	var timeouts []int64
	seen := map[int64]bool{}
	for range 1 + r.IntN(6) {
		v := int64(r.IntN(int(2*third + 2)))
		if !seen[v] {
			seen[v] = true
			timeouts = append(timeouts, v)
		}
	}
	spec := configs.SpaceSpec{{Name: BatchTimeoutMicros, Values: timeouts}}
	extra := []configs.ParamSpec{
		{Name: MaxBatchSize, Min: i64(1), Max: i64(1 << r.IntN(9)), Scale: configs.ScalePow2},
		{Name: NumBatchThreads, Min: i64(1), Max: i64(1 + int64(r.IntN(4)))},
		{Name: MaxEnqueuedBatches, Values: []int64{1 + int64(r.IntN(8)), 100}},
		{Name: IntraOpParallelism, Values: []int64{0, 1 + int64(r.IntN(8))}},
		{Name: AllowedBatchSizes, Choices: []string{"none", "pow2", "max"}[:1+r.IntN(3)]},
	}
	r.Shuffle(len(extra), func(i, j int) { extra[i], extra[j] = extra[j], extra[i] })
	spec = append(spec, extra[:1+r.IntN(len(extra))]...)
	r.Shuffle(len(spec), func(i, j int) { spec[i], spec[j] = spec[j], spec[i] })
	return spec, Rules{SLO: slo, Cores: 1 + r.IntN(8), GPUs: r.IntN(2)}
}

// randomHistory is a few random runnable points with random outcomes, plus
// (as a history may hold) a rule-breaking configuration that was rejected.
func randomHistory(r *rand.Rand, s *Space) []Trial {
	all, _ := s.Runnable(context.Background())
	var hist []Trial
	for range r.IntN(min(len(all), 12) + 1) {
		c := all[r.IntN(len(all))]
		tr := toyTrial(s, c)
		if r.IntN(3) == 0 {
			tr = Trial{Config: c, Outcome: Failed}
		}
		tr.Value *= 1 + 0.1*r.NormFloat64()
		hist = append(hist, tr)
	}
	return hist
}
