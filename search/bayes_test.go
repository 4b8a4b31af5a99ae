package search

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
)

func TestBayesInitialDesignStartsWithDefaultsAndRecipe(t *testing.T) {
	s := conformanceSpace(t)
	sugg, err := (&Bayes{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, N: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, sg := range sugg {
		reasons = append(reasons, sg.Reason)
		if sg.Expected != nil {
			t.Errorf("design point %v carries an expectation", sg.Config)
		}
	}
	if diff := cmp.Diff([]string{"tf-defaults-nearest", "recipe", "space-filling", "space-filling"}, reasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if !sugg[0].Config.Equal(s.Defaults()) || !sugg[1].Config.Equal(s.Recipe()) {
		t.Errorf("first two are %v and %v, want defaults %v and recipe %v", sugg[0].Config, sugg[1].Config, s.Defaults(), s.Recipe())
	}
	// Once they ran, the design goes on without them: asked for one
	// suggestion, its next slot is a hill-climbing step (local_fill, on by
	// default); a batch, as above, takes Halton points only.
	hist := []Trial{toyTrial(s, sugg[0].Config), toyTrial(s, sugg[1].Config)}
	more, err := (&Bayes{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(more[0].Reason, "local-fill: ") {
		t.Errorf("third design point's reason %q, want a local fill", more[0].Reason)
	}
}

func TestBayesKeepsUnhappyTrialsAsInformation(t *testing.T) {
	s := conformanceSpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hist := []Trial{
		{Config: all[0], Outcome: Succeeded, Measured: true, Value: 900, QPS: 900, P99: 12 * time.Millisecond, Feasible: true},
		{Config: all[1], Outcome: Failed},
		{Config: all[2], Outcome: EarlyStopped, Measured: true, Value: 300, P99: 80 * time.Millisecond, QPS: 300},
		{Config: all[3], Outcome: Rejected},
		{Config: all[4], Outcome: Invalid, Measured: true, Value: 50},
		{Config: all[5], Outcome: Interrupted},
	}
	obs := (&Bayes{}).observe(Request{Space: s, Objective: throughput, History: hist})
	// Objective data: the succeeded trial, the early-stopped one (what was
	// measured before its breach was certain: a tuner records nothing else
	// of a configuration over the SLO), and the failure at the lower
	// quartile of the objectives measured.
	if diff := cmp.Diff([]float64{math.Log(900), math.Log(300), math.Log(300)}, obs.fy, cmpApprox); diff != "" || len(obs.feasX) != 1 {
		t.Errorf("objective data (-want +got):\n%s\nfeasible points %d, want 1", diff, len(obs.feasX))
	}
	// Margins: the success (negative) and the early stop (log(80/30) > 0).
	if diff := cmp.Diff([]float64{math.Log(12.0 / 30), math.Log(80.0 / 30)}, obs.cy, cmpApprox); diff != "" {
		t.Errorf("constraint margins (-want +got):\n%s", diff)
	}
	// Load data: the success and the early stop came up (0), the failure did
	// not (1).
	if diff := cmp.Diff([]float64{0, 1, 0}, obs.ly); diff != "" {
		t.Errorf("load data (-want +got):\n%s", diff)
	}
	if obs.ran != 4 {
		t.Errorf("ran = %d, want 4 (succeeded, failed, early-stopped, invalid)", obs.ran)
	}
}

// TestBayesOutputFloor: with output_floor 0.5 the objective data below
// the median of the measured objectives read as the median; above it they
// keep their values (the units the stop rule reads).
func TestBayesOutputFloor(t *testing.T) {
	s := conformanceSpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var hist []Trial
	for i, q := range []float64{100, 400, 900, 1600, 2500} {
		hist = append(hist, Trial{Config: all[i], Outcome: Succeeded, Measured: true, Value: q, QPS: q, P99: 12 * time.Millisecond, Feasible: true})
	}
	obs := (&Bayes{OutputFloor: 0.5}).observe(Request{Space: s, Objective: throughput, History: hist})
	want := []float64{math.Log(900), math.Log(900), math.Log(900), math.Log(1600), math.Log(2500)}
	if diff := cmp.Diff(want, obs.fy, cmpApprox); diff != "" {
		t.Errorf("floored objective data (-want +got):\n%s", diff)
	}
	if d := dimScaledPrior(4); math.Abs(d.mean-(math.Sqrt2+math.Log(2))) > 1e-12 || d.hi < d.mean {
		t.Errorf("dimScaledPrior(4) = %+v, want median e^(√2 + ln 2) inside its bounds", d)
	}
}

// TestBayesInfeasibleCap: with infeasible_cap 1 a trial measured over
// the SLO enters the objective model at no more than the best feasible
// objective, one below it keeps its value, and nothing is capped before a
// trial has met the SLO; with 2 (the default) one below the lower quartile
// is raised to it too; with -1 the data are as measured.
func TestBayesInfeasibleCap(t *testing.T) {
	s := conformanceSpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	trial := func(i int, q float64, feasible bool) Trial {
		p99 := 12 * time.Millisecond
		if !feasible {
			p99 = time.Second
		}
		return Trial{Config: all[i], Outcome: Succeeded, Measured: true, Value: q, QPS: q, P99: p99, Feasible: feasible}
	}
	overOnly := []Trial{trial(0, 3000, false), trial(1, 200, false)}
	hist := append(slices.Clone(overOnly), trial(2, 900, true), trial(3, 1600, true))
	capped := (&Bayes{InfeasibleCap: 1}).observe(Request{Space: s, Objective: throughput, History: hist})
	want := []float64{math.Log(1600), math.Log(200), math.Log(900), math.Log(1600)}
	if diff := cmp.Diff(want, capped.fy, cmpApprox); diff != "" {
		t.Errorf("capped objective data (-want +got):\n%s", diff)
	}
	plain := (&Bayes{InfeasibleCap: -1}).observe(Request{Space: s, Objective: throughput, History: hist})
	if plain.fy[0] != math.Log(3000) || plain.fy[1] != math.Log(200) {
		t.Errorf("as measured (-1) the infeasible trials read %v and %v, want 3000 and 200", math.Exp(plain.fy[0]), math.Exp(plain.fy[1]))
	}
	// 2 also floors at the lower quartile (of the four, the second
	// smallest, 900 after the cap): 200 reads 900.
	clamped := (&Bayes{}).observe(Request{Space: s, Objective: throughput, History: hist})
	if diff := cmp.Diff([]float64{math.Log(1600), math.Log(900), math.Log(900), math.Log(1600)}, clamped.fy, cmpApprox); diff != "" {
		t.Errorf("clamped objective data (-want +got):\n%s", diff)
	}
	early := (&Bayes{InfeasibleCap: 1}).observe(Request{Space: s, Objective: throughput, History: overOnly})
	if diff := cmp.Diff([]float64{math.Log(3000), math.Log(200)}, early.fy, cmpApprox); diff != "" {
		t.Errorf("no feasible trial yet, so nothing capped (-want +got):\n%s", diff)
	}
}

var cmpApprox = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })

// TestBayesLearnsWhereServersFail: max_batch_size 128 and above does not
// fit device memory (TEST FIXTURE toy: half the space fails to load), and
// throughput is best right below that. After the initial design the
// failure model (and the failures' low place in the objective
// model) keep it off the failing half.
func TestBayesLearnsWhereServersFail(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(2), Max: i64(512), Scale: configs.ScalePow2},
		{Name: NumBatchThreads, Values: []int64{1, 2, 4, 8}},
		{Name: MaxEnqueuedBatches, Values: []int64{4, 16, 64}},
	}, rules60)
	measure := func(c Config) Trial {
		b, _ := c.Get(MaxBatchSize)
		n, _ := c.Get(NumBatchThreads)
		q, _ := c.Get(MaxEnqueuedBatches)
		if b >= 128 {
			return Trial{Config: c, Outcome: Failed}
		}
		qps := 1000 * math.Log2(float64(b)+1) * (1 + 0.2*math.Log2(float64(n))) * (1 - 0.05*math.Log2(float64(q)/4))
		return Trial{Config: c, Outcome: Succeeded, Measured: true, Value: qps, QPS: qps, P99: 10 * time.Millisecond, Feasible: true}
	}
	for seed := uint64(1); seed <= 3; seed++ {
		var hist []Trial
		late := 0
		for len(hist) < 30 {
			sugg, err := (&Bayes{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			tr := measure(sugg[0].Config)
			if len(hist) >= 8 && tr.Outcome == Failed {
				late++
			}
			hist = append(hist, tr)
		}
		// A blind strategy would fail about half of these 22 trials.
		if late > 3 {
			t.Errorf("seed %d: %d of trials 9–30 failed to load, want at most 3", seed, late)
		}
	}
}

// TestBayesBatchIsDiverse: with the kriging believer the n picks of one
// call spread out; without it they crowd around the single best spot.
func TestBayesBatchIsDiverse(t *testing.T) {
	s := conformanceSpace(t)
	// The history is the model's alone (no portfolio steps), as the
	// believer's work is the model's.
	hist := run(t, &Bayes{Init: 4, Portfolio: -1}, s, 11, 1, 12)
	spread := func(b *Bayes) float64 {
		sugg, err := b.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 5, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		if len(sugg) != 5 {
			t.Fatalf("got %d suggestions, want 5", len(sugg))
		}
		var d float64
		for i := range sugg {
			for j := range i {
				a, _ := s.features(sugg[i].Config)
				b, _ := s.features(sugg[j].Config)
				d += math.Sqrt(sqDist(a, b))
			}
		}
		return d / 10
	}
	// A small xi concentrates EI on the best spot, where the believer's
	// work shows (a larger xi spreads picks by itself).
	with, without := spread(&Bayes{Init: 4, Xi: 0.01}), spread(&Bayes{Init: 4, Xi: 0.01, noBeliever: true})
	if with <= 1.2*without {
		t.Errorf("mean pairwise distance %.3f with the believer, %.3f without: want clearly larger", with, without)
	}
}

func TestBayesExpectationNeedsAFeasibleTrial(t *testing.T) {
	s := conformanceSpace(t)
	all, _ := s.Runnable(t.Context())
	var hist []Trial
	for _, c := range all[:10] {
		tr := toyTrial(s, c)
		tr.Feasible = false
		hist = append(hist, tr)
	}
	// The model's reasons are what this test reads: no portfolio, whatever
	// its default.
	b := &Bayes{Init: 2, Portfolio: -1}
	sugg, err := b.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sugg[0].Expected != nil || sugg[0].Reason != "feasibility" {
		t.Errorf("with no feasible trial got reason %q, expected %v; want feasibility and none", sugg[0].Reason, sugg[0].Expected)
	}
	hist[3].Feasible = true
	sugg, err = b.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e := sugg[0].Expected; e == nil || *e < 0 || *e > 1 || sugg[0].Reason != "expected-improvement" {
		t.Errorf("with a feasible trial got reason %q, expected %v; want expected-improvement and a value in [0, 1]", sugg[0].Reason, e)
	}
}

// TestBayesMinimisesLatency runs the other objective: P99 at a fixed rate
// (toy: a U-shaped P99 in the batch size, the rate missed at batch 1).
func TestBayesMinimisesLatency(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(1), Max: i64(256), Scale: configs.ScalePow2},
		{Name: BatchTimeoutMicros, Values: []int64{0, 500, 1000, 2000, 4000, 8000}},
		{Name: NumBatchThreads, Values: []int64{1, 2, 3, 4}},
	}, rules60)
	obj := Objective{Kind: MinLatency, Rate: 1000, ErrorBudget: 0.01}
	measure := func(c Config) Trial {
		b, _ := c.Get(MaxBatchSize)
		tau, _ := c.Get(BatchTimeoutMicros)
		n, _ := c.Get(NumBatchThreads)
		lb := math.Log2(float64(b))
		ms := 2 + 0.6*(lb-4)*(lb-4) + float64(tau)/1000*0.8 + 0.5*math.Abs(float64(n)-2)
		qps := 1000.0
		if b == 1 {
			qps = 700
		}
		p99 := time.Duration(ms * float64(time.Millisecond))
		return Trial{Config: c, Outcome: Succeeded, Measured: true, Value: p99.Seconds(), P99: p99, QPS: qps, Feasible: qps >= 980}
	}
	best := math.Inf(1)
	all, _ := s.Runnable(t.Context())
	for _, c := range all {
		if tr := measure(c); tr.Feasible {
			best = math.Min(best, tr.Value)
		}
	}
	var hist []Trial
	for len(hist) < 20 {
		sugg, err := (&Bayes{}).Suggest(t.Context(), Request{Space: s, Objective: obj, History: hist, N: 1, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		hist = append(hist, measure(sugg[0].Config))
	}
	found := math.Inf(1)
	for _, tr := range hist {
		if tr.Feasible {
			found = math.Min(found, tr.Value)
		}
	}
	if found > best*1.1 {
		t.Errorf("best P99 after 20 trials %.2f ms, the space's best %.2f ms: want within 10%%", 1000*found, 1000*best)
	}
}

func TestSoftPrior(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: IntraOpParallelism, Values: []int64{0, 1, 2, 4, 8}},
		{Name: InterOpParallelism, Values: []int64{0, 1, 2, 8}},
	}, Rules{SLO: time.Second, Cores: 4})
	tests := []struct {
		name         string
		intra, inter int
		want         float64
	}{
		// At or below twice the cores: no penalty.
		{"fits", 2, 2, 1},
		{"twice the cores", 8, 1, 1},
		// Auto means one per core: 4 × 4 = 16 = 2 × 8 → sqrt(8/16).
		{"auto × auto", 0, 0, math.Sqrt(8.0 / 16)},
		// 8 × 8 = 64 threads on 4 cores.
		{"oversubscribed", 8, 8, math.Sqrt(8.0 / 64)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := softPrior(s, cfg(IntraOpParallelism, tc.intra, InterOpParallelism, tc.inter))
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("softPrior = %v, want %v", got, tc.want)
			}
		})
	}
	// A space with only oversubscribed points still gets suggestions: the
	// prior shapes, it never hides.
	over := mustSpace(t, configs.SpaceSpec{
		{Name: IntraOpParallelism, Values: []int64{16, 32}},
		{Name: InterOpParallelism, Values: []int64{16, 32}},
	}, Rules{SLO: time.Second, Cores: 2})
	hist := run(t, &Bayes{Init: 1}, over, 1, 1, 4)
	if len(hist) != 4 {
		t.Errorf("ran %d of the 4 oversubscribed points, want all", len(hist))
	}
}

func TestBayesValidate(t *testing.T) {
	tests := []struct {
		name string
		b    Bayes
		want []string
	}{
		// The zero value takes the defaults.
		{"defaults", Bayes{}, nil},
		{"bad", Bayes{Init: -1, Candidates: 3, Xi: -1, PriorStrength: math.NaN(), FitMax: 5000},
			[]string{"search.settings.init", "search.settings.candidates", "search.settings.xi", "search.settings.prior_strength", "search.settings.fit_max"}},
		{"recheck above one", Bayes{Recheck: 1.5}, []string{"search.settings.recheck"}},
		{"recheck negative", Bayes{Recheck: -0.1}, []string{"search.settings.recheck"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate(nil)
			var got []string
			if err != nil {
				got = problemFields(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// benchHistory is n trials on random runnable points of s, answered by the
// toy (TEST FIXTURE), with a little noise.
func benchHistory(b *testing.B, s *Space, n int) []Trial {
	all, err := s.Runnable(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	hist := make([]Trial, 0, n)
	for _, c := range all[:n] {
		tr := toyTrial(s, c)
		tr.Value *= 1 + 0.03*r.NormFloat64()
		hist = append(hist, tr)
	}
	return hist
}

// BenchmarkSuggest times one suggestion with 100 and 500 trials of
// history: on a 2 160-point space (scored whole) and on an 11 520-point
// space (scored on a 4 096-point sample plus neighbours of the best).
func BenchmarkSuggest(b *testing.B) {
	spaces := map[string]configs.SpaceSpec{
		"space=2160": {
			{Name: MaxBatchSize, Min: i64(1), Max: i64(512), Scale: configs.ScalePow2},
			{Name: BatchTimeoutMicros, Values: []int64{0, 1000, 2000, 5000, 8000, 30000}},
			{Name: NumBatchThreads, Values: []int64{1, 2, 4}},
			{Name: MaxEnqueuedBatches, Values: []int64{4, 16, 64, 256}},
			{Name: IntraOpParallelism, Values: []int64{0, 1, 2}},
		},
		"space=11520": {
			{Name: MaxBatchSize, Min: i64(1), Max: i64(512), Scale: configs.ScalePow2},
			{Name: BatchTimeoutMicros, Values: []int64{0, 500, 1000, 2000, 3000, 5000, 8000, 9000}},
			{Name: NumBatchThreads, Values: []int64{1, 2, 4, 8}},
			{Name: MaxEnqueuedBatches, Values: []int64{4, 16, 64, 256}},
			{Name: IntraOpParallelism, Values: []int64{0, 1, 2}},
			{Name: InterOpParallelism, Values: []int64{0, 1, 2}},
		},
	}
	for _, name := range []string{"space=2160", "space=11520"} {
		s := mustSpace(b, spaces[name], Rules{SLO: 30 * time.Millisecond, Cores: 2, GPUs: 1})
		for _, n := range []int{100, 500} {
			hist := benchHistory(b, s, n)
			for _, st := range []Strategy{&Bayes{}, &HillClimb{}, &Random{}, &Grid{}} {
				b.Run(fmt.Sprintf("%s/history=%d/%s", name, n, st.Name()), func(b *testing.B) {
					req := Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1}
					for b.Loop() {
						if _, err := st.Suggest(b.Context(), req); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// TestBayesToleratesGarbageMeasurements: NaN and infinite numbers from a
// broken measurement must not poison the models.
func TestBayesToleratesGarbageMeasurements(t *testing.T) {
	s := conformanceSpace(t)
	hist := run(t, &Random{}, s, 1, 1, 12)
	hist[2].Value, hist[2].QPS = math.NaN(), math.NaN()
	hist[5].ErrorRate = math.NaN()
	hist[7].Value = math.Inf(1)
	hist[9].Value = 0
	sugg, err := (&Bayes{Init: 4}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(sugg) != 3 {
		t.Fatalf("got %d suggestions, want 3", len(sugg))
	}
	for _, sg := range sugg {
		if sg.Expected != nil && (math.IsNaN(*sg.Expected) || math.IsInf(*sg.Expected, 0)) {
			t.Errorf("suggestion %v expects %v", sg.Config, *sg.Expected)
		}
	}
	m, _ := margin(throughput, s.rules.SLO, hist[5])
	if math.IsNaN(m) {
		t.Error("a NaN error rate gave a NaN margin")
	}
}

// TestBayesHedgeFollowsTheMemberThatImproves: after the design, a history
// whose hill-climbing steps each raised the best by 10% and whose other
// trials raised nothing hands most next suggestions to hill-climbing; the
// reverse history hands most to the model.
func TestBayesHedgeFollowsTheMemberThatImproves(t *testing.T) {
	s := conformanceSpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := &Bayes{Hedge: 10}
	st := b.settings()
	build := func(climbWins bool) []Trial {
		var hist []Trial
		q := 100.0
		add := func(c Config, improve bool) {
			if improve {
				q *= 1.1
			}
			v := q
			if !improve {
				v = 50
			}
			hist = append(hist, Trial{Config: c, Outcome: Succeeded, Measured: true, Value: v, QPS: v, P99: 10 * time.Millisecond, Feasible: true})
		}
		for i := range st.init {
			add(all[len(all)-1-i], true)
		}
		for i := range 12 {
			if i%2 == 0 {
				steps, err := (&HillClimb{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
				if err != nil || len(steps) != 1 {
					t.Fatalf("hill-climb step: %v %v", steps, err)
				}
				add(steps[0].Config, climbWins)
				continue
			}
			// A configuration hill-climbing would not have taken next:
			// the model's.
			for _, c := range all[i*7:] {
				if !slices.ContainsFunc(hist, func(tr Trial) bool { return tr.Config.Key() == c.Key() }) {
					add(c, !climbWins)
					break
				}
			}
		}
		return hist
	}
	for _, climbWins := range []bool{true, false} {
		hist := build(climbWins)
		local := 0
		for seed := range uint64(40) {
			if b.hedgeTurn(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: seed}, st) {
				local++
			}
		}
		if climbWins && local < 30 || !climbWins && local > 10 {
			t.Errorf("hill-climbing improved: %v; it got %d of 40 draws", climbWins, local)
		}
	}
}

// TestBayesFillPicksFarFromWhatRan: with the starting points and three
// configurations of the largest batches run, the default's first
// space-filling point (maximin, Fill 0, the same as Fill 1) lies farther
// from every trial than the next Halton point does (Fill -1's first pick,
// which is in maximin's pool), and no point repeats a trial or another
// pick.
func TestBayesFillPicksFarFromWhatRan(t *testing.T) {
	s := conformanceSpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The known starting points ran, and three configurations of the
	// largest batches.
	hist := []Trial{toyTrial(s, s.Defaults()), toyTrial(s, s.Recipe())}
	for i := len(all) - 1; len(hist) < 5; i-- {
		hist = append(hist, toyTrial(s, all[i]))
	}
	nearest := func(b *Bayes, c Config) float64 {
		x, _ := b.inputs(s, c)
		d := math.Inf(1)
		for _, tr := range hist {
			y, _ := b.inputs(s, tr.Config)
			d = math.Min(d, sqDist(x, y))
		}
		return d
	}
	picks := map[int][]Suggestion{}
	for _, fill := range []int{-1, 0, 1} {
		b := &Bayes{Fill: fill}
		sugg, err := b.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 3, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(sugg) != 3 {
			t.Fatalf("fill %d: %d suggestions, want 3", fill, len(sugg))
		}
		seen := map[string]bool{}
		for _, tr := range hist {
			seen[tr.Config.Key()] = true
		}
		for _, sg := range sugg {
			if sg.Reason != "space-filling" || seen[sg.Config.Key()] {
				t.Errorf("fill %d: %v (%s) is not a new space-filling point", fill, sg.Config, sg.Reason)
			}
			seen[sg.Config.Key()] = true
		}
		picks[fill] = sugg
	}
	if diff := cmp.Diff(picks[1], picks[0]); diff != "" {
		t.Errorf("fill 1 and the default (0) picked differently (-1 +0):\n%s", diff)
	}
	b := &Bayes{}
	if far, halton := nearest(b, picks[0][0].Config), nearest(b, picks[-1][0].Config); far <= halton {
		t.Errorf("maximin's first pick %v is %.3f from the trials, Halton's %v %.3f: want farther", picks[0][0].Config, far, picks[-1][0].Config, halton)
	}
}

// TestBayesLittleResiduals: with Little on, a closed-loop throughput study
// gives the constraint model log(P99/SLO) + log QPS, which is the same for
// two trials whose P99 × QPS agree (one tail ratio); off, or under an
// open-loop load, it gives none.
func TestBayesLittleResiduals(t *testing.T) {
	spec := configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(8), Max: i64(64), Scale: configs.ScalePow2},
		{Name: BatchTimeoutMicros, Values: []int64{0, 2000, 5000}},
	}
	closed := mustSpace(t, spec, Rules{SLO: 30 * time.Millisecond, Cores: 2, InFlight: 32})
	open := mustSpace(t, spec, Rules{SLO: 30 * time.Millisecond, Cores: 2})
	trial := func(s *Space, mbs int64, qps float64, p99 time.Duration) Trial {
		c := Config{{Name: MaxBatchSize, Value: mbs}, {Name: BatchTimeoutMicros, Value: 0}}
		return Trial{Config: c, Outcome: Succeeded, Measured: true, Value: qps, QPS: qps, P99: p99, Feasible: p99 <= s.rules.SLO}
	}
	for _, tc := range []struct {
		name  string
		b     *Bayes
		s     *Space
		wantN int
	}{
		{"on, closed loop", &Bayes{Little: 1}, closed, 2},
		{"off", &Bayes{}, closed, 0},
		{"on, open loop", &Bayes{Little: 1}, open, 0},
	} {
		hist := []Trial{trial(tc.s, 8, 1000, 40*time.Millisecond), trial(tc.s, 16, 2000, 20*time.Millisecond)}
		obs := tc.b.observe(Request{Space: tc.s, Objective: throughput, History: hist, N: 1, Seed: 1})
		if len(obs.ry) != tc.wantN || len(obs.cy) != 2 {
			t.Fatalf("%s: %d residuals and %d margins, want %d and 2", tc.name, len(obs.ry), len(obs.cy), tc.wantN)
		}
		if tc.wantN == 2 && math.Abs(obs.ry[0]-obs.ry[1]) > 1e-9 {
			t.Errorf("%s: residuals %v differ for one tail ratio (margins %v)", tc.name, obs.ry, obs.cy)
		}
	}
}

// TestBayesStopExpectationIgnoresXi: the expectation a suggestion carries
// for the stop rule is measured beyond stopXi whatever Xi the acquisition
// uses: scored alone, one configuration carries the same Expected under
// Xi 0.01 and 0.5 (and a positive one).
func TestBayesStopExpectationIgnoresXi(t *testing.T) {
	s := conformanceSpace(t)
	hist := run(t, &Bayes{}, s, 1, 1, 12)
	fresh, err := (&Bayes{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
	if err != nil || len(fresh) != 1 {
		t.Fatalf("suggest: %v %v", fresh, err)
	}
	idx, _ := s.indexOf(fresh[0].Config)
	var got []float64
	for _, xi := range []float64{0.01, 0.5} {
		b := &Bayes{Xi: xi}
		sg, err := b.acquire(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1}, b.settings(), b.observe(Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1}), takenFrom(s, hist), 1, [][]int{idx})
		if err != nil || len(sg) != 1 || sg[0].Expected == nil {
			t.Fatalf("xi %v: %v %v", xi, sg, err)
		}
		got = append(got, *sg[0].Expected)
	}
	if !(got[0] > 0) || math.Abs(got[0]-got[1]) > 1e-12*got[0] {
		t.Errorf("Expected under xi 0.01 and 0.5: %v, want equal and positive", got)
	}
}

// TestBayesRecheckRunsANearMissStartAgain: with Recheck, a known start
// whose one run missed the SLO narrowly, and that would lead had it met
// it, runs once more in the design; a wide miss, a start that would not
// lead, a second miss, the default and max_capacity do not.
func TestBayesRecheckRunsANearMissStartAgain(t *testing.T) {
	s := conformanceSpace(t) // 30 ms SLO; starts: TF's defaults, the recipe
	slo := s.rules.SLO
	run := func(c Config, qps float64, p99 time.Duration) Trial {
		return Trial{Config: c, Outcome: Succeeded, Measured: true, Value: qps, QPS: qps, P99: p99, Feasible: p99 <= slo}
	}
	defaults, recipe := s.Defaults(), s.Recipe()
	over := func(f float64) time.Duration { return time.Duration(f * float64(slo)) }
	next := func(b *Bayes, o Objective, hist []Trial) Suggestion {
		t.Helper()
		sugg, err := b.Suggest(t.Context(), Request{Space: s, Objective: o, History: hist, N: 1, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(sugg) != 1 {
			t.Fatalf("got %d suggestions, want 1", len(sugg))
		}
		return sugg[0]
	}
	on := &Bayes{Recheck: 0.2}
	tests := []struct {
		name    string
		b       *Bayes
		o       Objective
		hist    []Trial
		recheck bool
	}{
		{"a near miss that would lead", on, throughput,
			[]Trial{run(defaults, 500, over(0.5)), run(recipe, 600, over(1.1))}, true},
		{"no feasible trial yet", on, throughput,
			[]Trial{run(defaults, 500, over(1.5)), run(recipe, 600, over(1.15))}, true},
		{"a wide miss", on, throughput,
			[]Trial{run(defaults, 500, over(0.5)), run(recipe, 600, over(1.3))}, false},
		{"a near miss that would not lead", on, throughput,
			[]Trial{run(defaults, 800, over(0.5)), run(recipe, 600, over(1.1))}, false},
		{"rechecked once already", on, throughput,
			[]Trial{run(defaults, 500, over(0.5)), run(recipe, 600, over(1.1)), run(recipe, 590, over(1.05))}, false},
		{"off by default", &Bayes{}, throughput,
			[]Trial{run(defaults, 500, over(0.5)), run(recipe, 600, over(1.1))}, false},
		{"max_capacity", on, Objective{Kind: MaxCapacity, ErrorBudget: 0.01},
			[]Trial{run(defaults, 500, over(0.5)), run(recipe, 600, over(1.1))}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sg := next(tc.b, tc.o, tc.hist)
			got := strings.HasPrefix(sg.Reason, "recheck: ")
			if got != tc.recheck {
				t.Fatalf("suggested %v (%q); recheck %v, want %v", sg.Config, sg.Reason, got, tc.recheck)
			}
			if got && !sg.Config.Equal(recipe) {
				t.Errorf("rechecked %v, want the recipe %v", sg.Config, recipe)
			}
			if !got && (sg.Config.Equal(recipe) || sg.Config.Equal(defaults)) {
				t.Errorf("suggested a start again: %v (%q)", sg.Config, sg.Reason)
			}
		})
	}
	// min_latency: the objective is the latency itself, so a start within
	// the band of the best feasible latency is rechecked, one far above it
	// is not.
	lat := Objective{Kind: MinLatency, Rate: 500, ErrorBudget: 0.01}
	latRun := func(c Config, p99 time.Duration) Trial {
		tr := run(c, 500, p99)
		tr.Value = p99.Seconds()
		return tr
	}
	if sg := next(on, lat, []Trial{latRun(defaults, over(0.95)), latRun(recipe, over(1.1))}); !strings.HasPrefix(sg.Reason, "recheck: ") {
		t.Errorf("min_latency, 1.1x the SLO against a best of 0.95x: got %q, want a recheck", sg.Reason)
	}
	if sg := next(on, lat, []Trial{latRun(defaults, over(0.5)), latRun(recipe, over(1.1))}); strings.HasPrefix(sg.Reason, "recheck: ") {
		t.Errorf("min_latency, 1.1x the SLO against a best of 0.5x: got %q, want no recheck", sg.Reason)
	}
}

// TestBayesFeasibilityWeightDefault: the default squares the probability
// of feasibility (FeasibilityWeight 2): on the same histories Bayes{}
// suggests what FeasibilityWeight 2 does, and FeasibilityWeight 1 (the
// default before 2026-12-07) suggests something else on at least one.
// The histories come from a toy whose throughput grows with the timeout
// as its P99 does, so the best configurations sit at the SLO's edge,
// where the power matters.
func TestBayesFeasibilityWeightDefault(t *testing.T) {
	s := conformanceSpace(t)
	edge := func(c Config) Trial {
		tr := toyTrial(s, c)
		if tr.Outcome == Failed {
			return tr
		}
		tau, _ := c.Get(BatchTimeoutMicros)
		b, _ := c.Get(MaxBatchSize)
		tr.QPS *= 1 + float64(tau)/2000
		tr.Value = tr.QPS
		// P99 reaches the 30 ms SLO at the 5 ms timeout (the largest under
		// a third of it), with a repeatable jitter of up to ±4 ms (a hash
		// of the configuration), so the constraint model is unsure there.
		h := fnv.New32a()
		h.Write([]byte(c.String()))
		ms := 4 + 4.5*float64(tau)/1000 + float64(b)/8 + (float64(h.Sum32()%801)-400)/100
		tr.P99 = time.Duration(ms * float64(time.Millisecond))
		tr.Feasible = tr.P99 <= s.rules.SLO
		return tr
	}
	differs := 0
	for seed := uint64(1); seed <= 6; seed++ {
		var hist []Trial
		for len(hist) < 16 {
			sg, err := (&Bayes{}).Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: seed})
			if err != nil || len(sg) != 1 {
				t.Fatalf("seed %d: %v %v", seed, sg, err)
			}
			hist = append(hist, edge(sg[0].Config))
		}
		suggest := func(b *Bayes) string {
			sg, err := b.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 3, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, g := range sg {
				out = append(out, g.Config.String())
			}
			return strings.Join(out, "; ")
		}
		def, two, one := suggest(&Bayes{}), suggest(&Bayes{FeasibilityWeight: 2}), suggest(&Bayes{FeasibilityWeight: 1})
		if def != two {
			t.Errorf("seed %d: the default suggested %s, FeasibilityWeight 2 %s", seed, def, two)
		}
		if one != def {
			differs++
		}
	}
	if differs == 0 {
		t.Error("FeasibilityWeight 1 suggested what the default does on every history: the default is not 2")
	}
}
