package confirm

import (
	"slices"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/estimate"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

func TestAllowedBreaches(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 6: 1, 7: 2} {
		if got := AllowedBreaches(n); got != want {
			t.Errorf("AllowedBreaches(%d) = %d, want %d", n, got, want)
		}
	}
}

// tally is a candidate whose repeats all measured samples, feasible of them
// meeting the SLO.
func tally(r Rule, feasible int, samples ...float64) *Tally {
	t := &Tally{Samples: samples, Repeats: len(samples), Feasible: feasible}
	r.Summarise(t)
	return t
}

func TestEligible(t *testing.T) {
	r := Rule{Direction: objective.Maximize, Level: 0.95, Repeats: 3, MaxRepeats: 6}
	for _, tc := range []struct {
		feasible, repeats int
		want              bool
	}{
		{0, 0, false}, {3, 3, true}, {2, 3, false}, {3, 4, true}, {2, 4, false}, {5, 6, true},
	} {
		samples := make([]float64, tc.repeats)
		for i := range samples {
			samples[i] = 100
		}
		if got := tally(r, tc.feasible, samples...).Eligible(); got != tc.want {
			t.Errorf("%d of %d met the SLO: Eligible = %v, want %v", tc.feasible, tc.repeats, got, tc.want)
		}
	}
}

// The conservative bound ranks: for a throughput the lower bound, so a
// tight 900 beats a wide 1000; for a latency the upper bound, the other
// way round.
func TestLeaderRanksByTheConservativeBound(t *testing.T) {
	up := Rule{Direction: objective.Maximize, Level: 0.95, Repeats: 3, MaxRepeats: 6}
	wide := tally(up, 3, 600, 1000, 1600)
	tight := tally(up, 3, 890, 900, 910)
	broke := tally(up, 1, 2000, 2000, 2000) // best figures, but broke the SLO twice
	if got := up.Leader([]*Tally{wide, tight, broke}); got != 1 {
		t.Errorf("throughput leader = %d, want 1 (the tight 900 by its lower bound)", got)
	}
	down := Rule{Direction: objective.Minimize, Level: 0.95, Repeats: 3, MaxRepeats: 6}
	lwide := tally(down, 3, 0.006, 0.010, 0.016)
	ltight := tally(down, 3, 0.0119, 0.012, 0.0121)
	if got := down.Leader([]*Tally{lwide, ltight}); got != 1 {
		t.Errorf("latency leader = %d, want 1 (the tight 12 ms by its upper bound)", got)
	}
	if got := up.Leader([]*Tally{broke}); got != -1 {
		t.Errorf("leader among none eligible = %d, want -1", got)
	}
	// Equal bounds: the better mean leads.
	a, b := &Tally{Repeats: 1, Feasible: 1, Bound: 5}, &Tally{Repeats: 1, Feasible: 1, Bound: 5}
	a.Estimate.Mean, b.Estimate.Mean = 6, 7
	if !up.Before(b, a) || up.Before(a, b) {
		t.Errorf("equal bounds: want the better mean first")
	}
}

// After the planned rounds: a split SLO verdict and every interval that
// overlaps the leader's (the leader with them) are measured again; a
// clearly worse candidate, an undecided one at MaxRepeats and a baseline
// whose verdict is not split are not; with nothing undecided, nobody is.
func TestNextRemeasuresOnlyTheUndecided(t *testing.T) {
	r := Rule{Direction: objective.Maximize, Level: 0.95, Repeats: 2, MaxRepeats: 4}
	lead := tally(r, 2, 1000, 1010)
	rival := tally(r, 2, 800, 1300) // wide: overlaps the leader
	worse := tally(r, 2, 500, 505)
	split := tally(r, 1, 990, 995)
	spent := tally(r, 4, 700, 1300, 700, 1300) // overlaps, but at MaxRepeats
	base := tally(r, 2, 400, 800)
	all := []*Tally{lead, rival, worse, split, spent, base}

	want, _ := r.Next(0, all, 5)
	if !slices.Equal(want, []bool{true, true, true, true, true, true}) {
		t.Errorf("planned round: want everyone, got %v", want)
	}
	want, needs := r.Next(2, all, 5)
	if !slices.Equal(want, []bool{true, true, false, true, false, false}) {
		t.Fatalf("round 3: measured %v, want [lead rival split] only; needs %+v", want, needs)
	}
	if !needs[3].Split || !slices.Equal(needs[1].Overlaps, []int{0}) || !slices.Equal(needs[0].Overlaps, []int{1, 4}) {
		t.Errorf("needs %+v: want the split named, the rival against the leader, the leader against both rivals", needs)
	}
	// A baseline whose verdict is split is measured again too.
	base.Feasible = 1
	if want, _ := r.Next(2, all, 5); !want[5] {
		t.Errorf("a split baseline was not measured again")
	}
	// Settled: the leader stands apart and nothing is split.
	settled := []*Tally{tally(r, 2, 1000, 1001), tally(r, 2, 500, 501)}
	if want, _ := r.Next(2, settled, 2); slices.Contains(want, true) {
		t.Errorf("settled stage: measured %v, want nobody", want)
	}
}

func TestCandidates(t *testing.T) {
	space, err := search.NewSpace(configs.SpaceSpec{
		{Name: search.MaxBatchSize, Values: []int64{8, 16, 32, 64}},
		{Name: search.BatchTimeoutMicros, Values: []int64{0, 20000}},
	}, search.Rules{SLO: 100 * time.Millisecond, Cores: 2, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(batch, timeout int64) search.Config {
		return search.Config{{Name: search.MaxBatchSize, Value: batch}, {Name: search.BatchTimeoutMicros, Value: timeout}}
	}
	ok := func(c search.Config, qps float64) search.Trial {
		return search.Trial{Config: c, Outcome: search.Succeeded, Measured: true, Feasible: true, Value: qps}
	}
	broke := ok(cfg(64, 20000), 5000)
	broke.Feasible = false
	hist := []search.Trial{
		ok(cfg(16, 0), 300),
		broke,
		ok(cfg(32, 20000), 900),
		ok(cfg(16, 0), 350), // the config's best run
		ok(cfg(32, 0), 600),
		ok(cfg(64, 0), 100),
	}
	req := search.Request{Space: space, Objective: search.Objective{Kind: search.MaxThroughput, ErrorBudget: 0.01}, History: hist}
	got, err := Candidates(t.Context(), &search.Random{}, req, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Random ranks by the best measurement: 32/20000 (900), 32/0 (600);
	// then the recipe (batch 8, 20 ms), which nothing ran.
	want := []Candidate{{cfg(32, 20000), 2}, {cfg(32, 0), 4}, {space.Recipe(), -1}}
	if len(got) != len(want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Config.Equal(want[i].Config) || got[i].Trial != want[i].Trial {
			t.Errorf("candidate %d = %v (trial %d), want %v (trial %d)", i, got[i].Config, got[i].Trial, want[i].Config, want[i].Trial)
		}
	}
	if r := space.Recipe(); !r.Equal(cfg(8, 20000)) {
		t.Fatalf("fixture: recipe %v, want batch 8 at 20 ms", r)
	}
	// The recipe among the top k is not added twice; a config's best run
	// labels it.
	req.History = append(hist, ok(cfg(8, 20000), 2000))
	got, err = Candidates(t.Context(), &search.Random{}, req, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].Config.Equal(cfg(8, 20000)) || got[0].Trial != 6 {
		t.Errorf("with the recipe best: %v, want it first (trial 6) and not again", got)
	}
	req.History = append(hist[:0:0], ok(cfg(16, 0), 300), ok(cfg(16, 0), 350))
	if got, _ = Candidates(t.Context(), &search.Random{}, req, 1); len(got) != 2 || got[0].Trial != 1 {
		t.Errorf("one config run twice: %v, want it labelled by its best run (1), then the recipe", got)
	}
	// Nothing feasible: no candidates, not even the recipe.
	req.History = []search.Trial{broke}
	if got, err = Candidates(t.Context(), &search.Random{}, req, 3); err != nil || got != nil {
		t.Errorf("nothing feasible: %v, %v; want none", got, err)
	}
}

// Summarise's bound is the interval's conservative end.
func TestSummarise(t *testing.T) {
	samples := []float64{90, 100, 110}
	e := estimate.Of(samples, 0.9)
	up := &Tally{Samples: samples}
	(Rule{Direction: objective.Maximize, Level: 0.9}).Summarise(up)
	down := &Tally{Samples: samples}
	(Rule{Direction: objective.Minimize, Level: 0.9}).Summarise(down)
	if up.Estimate != e || up.Bound != e.Low || down.Bound != e.High {
		t.Errorf("bounds %v / %v, want %v / %v", up.Bound, down.Bound, e.Low, e.High)
	}
}

// Under the stricter verdict (Clean) no breach is forgiven, a split
// verdict is not re-measured (nothing can forgive it), and the leader is
// re-measured until it has met the SLO Clean times; when it breaks the
// SLO the next one leads and is re-measured in its turn.
func TestCleanRemeasuresTheLeader(t *testing.T) {
	r := Rule{Direction: objective.Maximize, Level: 0.95, Repeats: 3, MaxRepeats: 6, Clean: 6}
	if got := (Rule{Repeats: 3, MaxRepeats: 6}).Rounds(4); got != 6 {
		t.Errorf("Rounds of the default verdict = %d, want 6 (max_repeats)", got)
	}
	if got := r.Rounds(4); got < 3+2*6 {
		t.Errorf("Rounds(4) of clean 6 = %d: too few for a leader that broke the SLO in its last repeat to be followed by two more", got)
	}
	forgiven := tally(Rule{Direction: objective.Maximize, Level: 0.95}, 5, 100, 100, 100, 100, 100, 100)
	strict := tally(r, 5, 100, 100, 100, 100, 100, 100)
	if !forgiven.Eligible() || strict.Eligible() || !strict.Strict {
		t.Errorf("5 of 6 met the SLO: default eligible %v, strict eligible %v (Strict %v); want true, false, true", forgiven.Eligible(), strict.Eligible(), strict.Strict)
	}
	lead := tally(r, 3, 1000, 1001, 1002)
	worse := tally(r, 3, 500, 501, 502)
	split := tally(r, 2, 2000, 2001, 2002)
	all := []*Tally{lead, worse, split}
	want, needs := r.Next(3, all, 3)
	if !slices.Equal(want, []bool{true, false, false}) || !needs[0].Short || needs[2].Split {
		t.Fatalf("round 4: measured %v, needs %+v; want the leader only, short of clean repeats, and no split", want, needs)
	}
	// The leader breaks the SLO in its fourth repeat: the next one leads.
	lead.Samples, lead.Repeats = append(lead.Samples, 990), 4
	r.Summarise(lead)
	if want, needs := r.Next(4, all, 3); !slices.Equal(want, []bool{false, true, false}) || !needs[1].Short {
		t.Errorf("after the leader broke the SLO: measured %v, needs %+v; want the next one", want, needs)
	}
	// A leader with its clean repeats settles the stage.
	done := tally(r, 6, 1000, 1001, 1002, 1000, 1001, 1002)
	if want, _ := r.Next(6, []*Tally{done, worse}, 2); slices.Contains(want, true) {
		t.Errorf("leader with 6 clean repeats: measured %v, want nobody", want)
	}
	// A stage run to its end: the leader breaks the SLO in its sixth
	// repeat, and the next one still gets its six clean repeats before it
	// is handed over.
	a, b := &Tally{}, &Tally{}
	stage := []*Tally{a, b}
	for round := range r.Rounds(len(stage)) {
		want, _ := r.Next(round, stage, 2)
		if !slices.Contains(want, true) {
			break
		}
		for i, w := range want {
			if !w {
				continue
			}
			t := stage[i]
			t.Repeats++
			v := 500.0
			if i == 0 {
				v = 1000
			}
			if i == 1 || t.Repeats < 6 {
				t.Feasible++
			}
			t.Samples = append(t.Samples, v)
			r.Summarise(t)
		}
	}
	if lead := r.Leader(stage); lead != 1 || b.Repeats != 6 || b.Feasible != 6 || a.Repeats != 6 {
		t.Errorf("leader %d; a %d of %d, b %d of %d; want b after six clean repeats, a out after its sixth", lead, a.Feasible, a.Repeats, b.Feasible, b.Repeats)
	}
}
