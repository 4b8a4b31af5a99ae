package search

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchtune/batchtune/configs"
)

func TestMeasuredOrder(t *testing.T) {
	s := conformanceSpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ok := func(c Config, v float64) Trial {
		return Trial{Config: c, Outcome: Succeeded, Measured: true, Feasible: true, Value: v}
	}
	hist := []Trial{
		ok(all[0], 500),
		ok(all[1], 400),
		{Config: all[2], Outcome: Succeeded, Measured: true, Value: 2000}, // broke the SLO
		{Config: all[3], Outcome: EarlyStopped, Measured: true, Value: 3000, Feasible: true},
		ok(all[0], 1000), // a repeat: its best measurement counts
		ok(all[4], 900),
		ok(all[6], 900), // ties all[4]: the history's order stays
		{Config: all[5], Outcome: Failed},
	}
	got := MeasuredOrder(throughput, hist)
	want := []Config{all[0], all[4], all[6], all[1]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("throughput order (-want +got):\n%s", diff)
	}
	latency := Objective{Kind: MinLatency, ErrorBudget: 0.01}
	got = MeasuredOrder(latency, hist)
	want = []Config{all[1], all[0], all[4], all[6]}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("latency order (-want +got):\n%s", diff)
	}
	// A strategy without models ranks by the measurements.
	got, err = Rank(t.Context(), &Random{}, Request{Space: s, Objective: throughput, History: hist, N: 1})
	if err != nil || !cmp.Equal([]Config{all[0], all[4], all[6], all[1]}, got) {
		t.Errorf("Rank(random) = %v, %v; want the measured order", got, err)
	}
}

// tightToy is toyTrial under a 12 ms SLO (TEST FIXTURE, a closed-form toy):
// P99 4 ms + 1.2 × the timeout + max_batch_size/8 ms, so max_batch_size 64
// with a 2 ms timeout (14.4 ms) breaks the SLO and every other runnable
// configuration meets it; 64 with 4 threads fails to load.
func tightToySpace(t *testing.T) *Space {
	return mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Values: []int64{8, 16, 32, 64}},
		{Name: BatchTimeoutMicros, Values: []int64{0, 2000}},
		{Name: NumBatchThreads, Values: []int64{1, 2, 4}},
		{Name: MaxEnqueuedBatches, Values: []int64{4, 16}},
	}, Rules{SLO: 12 * time.Millisecond, Cores: 2, GPUs: 1})
}

// TestBayesRankDoesNotTrustOneLuckyRun: one run of a configuration in a
// region that breaks the SLO came out just under it, with the highest
// throughput measured. By the measurements it ranks first; the models,
// which saw its neighbours break the SLO, rank it after the
// configurations that surely meet it.
func TestBayesRankDoesNotTrustOneLuckyRun(t *testing.T) {
	s := tightToySpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var hist []Trial
	var lucky Config
	for _, c := range all {
		tr := toyTrial(s, c)
		if b, _ := c.Get(MaxBatchSize); b == 64 {
			if to, _ := c.Get(BatchTimeoutMicros); to == 2000 && tr.Feasible {
				t.Fatalf("fixture: %v meets the SLO (P99 %v)", c, tr.P99)
			}
			n, _ := c.Get(NumBatchThreads)
			if to, _ := c.Get(BatchTimeoutMicros); to == 2000 && n == 2 && lucky == nil {
				lucky = c
				tr.P99, tr.Feasible = 11900*time.Microsecond, true
				tr.Value *= 1.3
				tr.QPS = tr.Value
			}
		}
		hist = append(hist, tr)
	}
	if first := MeasuredOrder(throughput, hist)[0]; !first.Equal(lucky) {
		t.Fatalf("fixture: the measurements rank %v first, want the lucky %v", first, lucky)
	}
	got, err := (&Bayes{}).Rank(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(MeasuredOrder(throughput, hist)) {
		t.Fatalf("Rank returned %d configurations, want every one measured feasible (%d)", len(got), len(MeasuredOrder(throughput, hist)))
	}
	// Every configuration of max_batch_size 32 or less meets the SLO by a
	// clear margin (P99 at most 10.4 ms against 12): each must rank before the lucky
	// one.
	luckyAt := slices.IndexFunc(got, lucky.Equal)
	for i, c := range got[luckyAt+1:] {
		if b, _ := c.Get(MaxBatchSize); b <= 32 {
			t.Errorf("the lucky run ranks %d of %d, before %v (%d)", luckyAt+1, len(got), c, luckyAt+2+i)
		}
	}
	// Ranked -1 gives the measurements back.
	raw, err := (&Bayes{Ranked: -1}).Rank(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1})
	if err != nil || !cmp.Equal(MeasuredOrder(throughput, hist), raw) {
		t.Errorf("Ranked -1: %v, %v; want the measured order", raw, err)
	}
}

// TestBayesRankShrinksNoisyMeasurements: with 20% noise on every
// measurement, the configuration the models rank first is on average
// truly better than the one that measured best (the winner's curse),
// over 20 noisy histories.
func TestBayesRankShrinksNoisyMeasurements(t *testing.T) {
	s := conformanceSpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	truth := func(c Config) float64 {
		tr := toyTrial(s, c)
		if !tr.Feasible {
			return 0
		}
		return tr.Value
	}
	var byModel, byMeasurement float64
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var hist []Trial
		for _, i := range rng.Perm(len(all))[:60] {
			tr := toyTrial(s, all[i])
			if tr.Measured {
				tr.Value *= math.Exp(0.2 * rng.NormFloat64())
				tr.QPS = tr.Value
			}
			hist = append(hist, tr)
		}
		got, err := (&Bayes{}).Rank(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		byModel += truth(got[0])
		byMeasurement += truth(MeasuredOrder(throughput, hist)[0])
	}
	if byModel <= byMeasurement {
		t.Errorf("mean truth of the first-ranked: by the models %.0f, by the measurements %.0f; want the models ahead", byModel/20, byMeasurement/20)
	}
	t.Logf("mean truth of the first-ranked: by the models %.0f, by the measurements %.0f", byModel/20, byMeasurement/20)
}

// TestBayesRankReadsTheDataAsMeasured: the default clamps an infeasible
// trial's objective for the search's models (InfeasibleCap), but Rank
// fits its models to the data as measured. Over noisy histories with
// trials over the SLO, the clamp changes the order on some (so the
// comparison can fail), and Rank's order is the unclamped one on all.
func TestBayesRankReadsTheDataAsMeasured(t *testing.T) {
	s := tightToySpace(t)
	all, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := &Bayes{}
	differs := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var hist []Trial
		for _, i := range rng.Perm(len(all))[:len(all)*2/3] {
			tr := toyTrial(s, all[i])
			if tr.Measured {
				tr.Value *= math.Exp(0.3 * rng.NormFloat64())
				tr.QPS = tr.Value
			}
			hist = append(hist, tr)
		}
		req := Request{Space: s, Objective: throughput, History: hist, N: 1}
		got, err := b.Rank(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		measured, err := b.rankWith(t.Context(), req, -1)
		if err != nil {
			t.Fatal(err)
		}
		clamped, err := b.rankWith(t.Context(), req, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(measured, got) {
			t.Errorf("seed %d: Rank = %v, want the order on the data as measured %v", seed, got, measured)
		}
		if !cmp.Equal(measured, clamped) {
			differs++
		}
	}
	if differs == 0 {
		t.Error("fixture: the clamp changed no order, so this test cannot tell the two apart")
	}
	t.Logf("the clamp changed the order on %d of 20 histories", differs)
}
