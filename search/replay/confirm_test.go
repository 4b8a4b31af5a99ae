package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/confirm"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

// confirmSurface (a UNIT-TEST FIXTURE, not a measurement) is
// max_batch_size {4, 8, 16, 32} × timeout {0, 10000}, SLO 60 ms, where the
// search's best measurements were luck: 32/0 served 3000 req/s within the
// SLO in one run of five and broke it in the rest, 16/0 served 2000 once
// and 900 otherwise, while 16/10000 serves 1500 in every run. The recipe
// (8/10000) breaks the SLO.
func confirmSurface(t *testing.T) *Surface {
	t.Helper()
	head := `{"format":"batchtune-surface/1","name":"confirm-fixture","source":"search/replay/confirm_test.go (unit-test fixture)","objective":"max_throughput","concurrency":32,"slo":"60ms","error_budget":0.01,"cores":2,"gpus":1,"space":[{"name":"max_batch_size","values":[4,8,16,32]},{"name":"batch_timeout_micros","values":[0,10000]}]}`
	lines := []string{head}
	add := func(b, tau int, qps float64, p99 int, n int) {
		for i := range n {
			lines = append(lines, fmt.Sprintf(`{"config":[%d,%d],"qps":%g,"p99_us":%d,"error_rate":0}`, b, tau, qps+float64(i), p99))
		}
	}
	add(32, 0, 3000, 20000, 1)
	add(32, 0, 3000, 90000, 4)
	add(16, 0, 2000, 20000, 1)
	add(16, 0, 900, 20000, 5)
	add(16, 10000, 1500, 30000, 6)
	add(8, 10000, 700, 90000, 3)
	add(4, 0, 500, 10000, 3)
	add(4, 10000, 300, 20000, 3)
	add(8, 0, 300, 20000, 3)
	add(32, 10000, 300, 20000, 3)
	s, err := Decode(strings.NewReader(strings.Join(lines, "\n")+"\n"), "confirm-fixture")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stage runs confirmRun on what the strategy hands over from hist.
func stage(t *testing.T, s *Surface, st search.Strategy, hist []search.Trial, seed uint64, c configs.Confirmation) (search.Config, Truth, int) {
	t.Helper()
	cands, err := confirm.Candidates(t.Context(), st, search.Request{Space: s.Space(), Objective: s.Objective(), History: hist, Seed: seed}, c.TopK)
	if err != nil {
		t.Fatal(err)
	}
	won, truth, n, err := confirmRun(s, cands, seed, c)
	if err != nil {
		t.Fatal(err)
	}
	return won, truth, n
}

func cfg2(b, tau int64) search.Config {
	return search.Config{{Name: search.MaxBatchSize, Value: b}, {Name: search.BatchTimeoutMicros, Value: tau}}
}

// The stage re-measures the lucky configurations and hands over the one
// that holds up: 16/10000, not the pick (32/0, best measured) nor 16/0;
// with only configurations that break the SLO in their repeats it hands
// over nothing.
func TestConfirmRunHandsOverWhatHoldsUp(t *testing.T) {
	s := confirmSurface(t)
	if r := s.Space().Recipe(); !r.Equal(cfg2(8, 10000)) {
		t.Fatalf("fixture: recipe %v, want 8/10000", r)
	}
	ok := func(c search.Config, qps float64) search.Trial {
		return search.Trial{Config: c, Outcome: search.Succeeded, Measured: true, Feasible: true, Value: qps, QPS: qps}
	}
	hist := []search.Trial{ok(cfg2(32, 0), 3000), ok(cfg2(16, 0), 2000), ok(cfg2(16, 10000), 1500), ok(cfg2(4, 0), 500)}
	c := configs.DefaultStudy().Confirmation
	for seed := uint64(1); seed <= 10; seed++ {
		won, truth, n := stage(t, s, &search.Random{}, hist, seed, c)
		if !won.Equal(cfg2(16, 10000)) || !truth.Feasible {
			t.Errorf("seed %d: confirmed %v (truth %+v), want 16/10000", seed, won, truth)
		}
		// The top k of the four measured feasible and the recipe,
		// c.Repeats each at least, c.MaxRepeats each at most.
		k := min(c.TopK, len(hist)) + 1
		if n < k*c.Repeats || n > k*c.MaxRepeats {
			t.Errorf("seed %d: %d repeats, want between %d and %d", seed, n, k*c.Repeats, k*c.MaxRepeats)
		}
	}
	for seed := uint64(1); seed <= 10; seed++ {
		won, _, n := stage(t, s, &search.Random{}, hist[:1], seed, c)
		if won != nil || n < 2*c.Repeats {
			t.Errorf("seed %d: only 32/0 and the recipe: confirmed %v after %d repeats, want nothing after at least %d", seed, won, n, 2*c.Repeats)
		}
	}
	if won, _, n := stage(t, s, &search.Random{}, nil, 1, c); won != nil || n != 0 {
		t.Errorf("empty history: %v, %d repeats; want nothing", won, n)
	}
}

// Bench with Confirm reports the stage's winner per run and its share per
// row, and writes the columns; without it, neither.
func TestBenchConfirm(t *testing.T) {
	s := confirmSurface(t)
	c := configs.DefaultStudy().Confirmation
	rep, err := Bench(t.Context(), s, BenchOptions{Strategies: []search.Strategy{&search.Grid{}}, Seeds: 5, Budget: 8, Horizon: 8, Confirm: &c})
	if err != nil {
		t.Fatal(err)
	}
	row := rep.Rows[0]
	// Grid runs all eight configurations: its pick is the luckiest
	// measurement, the stage's winner 16/10000 (the best truly feasible
	// configuration) on every seed.
	for _, r := range row.Runs {
		if !r.Confirmed.Equal(cfg2(16, 10000)) || r.ConfirmRepeats < 4*c.Repeats {
			t.Errorf("seed %d: confirmed %v after %d repeats, want 16/10000 after at least %d", r.Seed, r.Confirmed, r.ConfirmRepeats, 4*c.Repeats)
		}
	}
	if row.ConfirmedRatio != 1 || row.ConfirmedFeasible != 1 || row.ConfirmRepeats < float64(4*c.Repeats) {
		t.Errorf("row: confirmed %.3f of the best, %.0f%% feasible, %.1f repeats; want 1, 100%%, at least %d", row.ConfirmedRatio, 100*row.ConfirmedFeasible, row.ConfirmRepeats, 4*c.Repeats)
	}
	if row.ConfirmedNone != 0 {
		t.Errorf("row: recommended nothing on %.0f%% of seeds, want 0", 100*row.ConfirmedNone)
	}
	// A seed whose stage recommends nothing counts as none, and as 0.
	two := summarise("x", []Run{{Reach: []int{1}}, {Reach: []int{1}, Confirmed: cfg2(16, 10000), ConfirmedTruth: Truth{Feasible: true, Value: 1500}, ConfirmRepeats: 12}},
		[]float64{0.95}, func(Run) float64 { return 0 }, func(r Run) float64 { return ConfirmedShare(r, objective.Maximize, 3000) })
	if two.ConfirmedNone != 0.5 || two.ConfirmedFeasible != 0.5 || two.ConfirmedRatio != 0 || two.ConfirmRepeats != 6 {
		t.Errorf("two seeds, one recommending nothing: %+v", two)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "confirmed none") || !strings.Contains(b.String(), "confirmed/best") || !strings.Contains(b.String(), fmt.Sprintf("top %d and the recipe, 3 repeats each, up to 6", c.TopK)) {
		t.Errorf("table lacks the confirmation's columns or settings:\n%s", b.String())
	}
	rep, err = Bench(t.Context(), s, BenchOptions{Strategies: []search.Strategy{&search.Grid{}}, Seeds: 2, Budget: 8, Horizon: 8})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if rep.Rows[0].Runs[0].Confirmed != nil || strings.Contains(b.String(), "confirmed") {
		t.Errorf("without Confirm: run %+v, table:\n%s", rep.Rows[0].Runs[0], b.String())
	}
	// The pick is the same with the stage as without it (with it, the
	// stage's first candidate): the history is ranked once for both.
	for i, r := range rep.Rows[0].Runs {
		if w := row.Runs[i]; !w.Pick.Equal(r.Pick) || w.PickTruth != r.PickTruth || r.Pick == nil {
			t.Errorf("seed %d: pick %v with the stage, %v without", r.Seed, w.Pick, r.Pick)
		}
	}
}

// A configuration that meets the SLO in two restarts of three and breaks
// it badly in the third (its mean P99 is over the SLO: truly infeasible)
// passes the default verdict when its three repeats happen to be good
// ((2/3)^3, 30%) or when it breaks the SLO in one of them and in none of
// three more (one in six forgiven: 13%), about 43% in all; the stricter verdict (clean_repeats 6: no breach
// forgiven, the leader re-measured until it has six) hands it over about
// one time in ten, and the configuration that holds up otherwise.
func TestConfirmRunCleanRepeats(t *testing.T) {
	head := `{"format":"batchtune-surface/1","name":"clean-fixture","source":"search/replay/confirm_test.go (unit-test fixture)","objective":"max_throughput","concurrency":32,"slo":"60ms","error_budget":0.01,"cores":2,"gpus":1,"space":[{"name":"max_batch_size","values":[4,8,16,32]},{"name":"batch_timeout_micros","values":[0,10000]}]}`
	lines := []string{head}
	add := func(b, tau int, qps float64, p99s ...int) {
		for _, p := range p99s {
			lines = append(lines, fmt.Sprintf(`{"config":[%d,%d],"qps":%g,"p99_us":%d,"error_rate":0}`, b, tau, qps, p))
		}
	}
	add(32, 0, 3000, 50000, 55000, 120000) // mean P99 75 ms: truly infeasible
	add(16, 10000, 1500, 30000, 31000, 32000)
	add(4, 0, 500, 10000, 10000, 10000)
	for _, c := range [][2]int{{4, 10000}, {8, 0}, {8, 10000}, {16, 0}, {32, 10000}} {
		add(c[0], c[1], 300, 90000, 90000, 90000)
	}
	s, err := Decode(strings.NewReader(strings.Join(lines, "\n")+"\n"), "clean-fixture")
	if err != nil {
		t.Fatal(err)
	}
	ok := func(c search.Config, qps float64) search.Trial {
		return search.Trial{Config: c, Outcome: search.Succeeded, Measured: true, Feasible: true, Value: qps, QPS: qps}
	}
	hist := []search.Trial{ok(cfg2(32, 0), 3000), ok(cfg2(16, 10000), 1500), ok(cfg2(4, 0), 500)}
	const seeds = 300
	bad := func(c configs.Confirmation) (share float64, repeats int) {
		n := 0
		for seed := uint64(1); seed <= seeds; seed++ {
			won, truth, k := stage(t, s, &search.Random{}, hist, seed, c)
			if won == nil {
				t.Fatalf("seed %d: nothing handed over; 16/10000 meets the SLO in every run", seed)
			}
			if !truth.Feasible {
				n++
			}
			repeats += k
		}
		return float64(n) / seeds, repeats
	}
	def := configs.DefaultStudy().Confirmation
	clean := def
	clean.CleanRepeats = 6
	dShare, dRepeats := bad(def)
	cShare, cRepeats := bad(clean)
	if dShare < 0.33 || dShare > 0.53 {
		t.Errorf("default verdict: truly infeasible winner on %.0f%% of seeds, want about 43%%", 100*dShare)
	}
	t.Logf("truly infeasible winners: default %.0f%% (%d repeats), clean_repeats 6 %.0f%% (%d repeats)", 100*dShare, dRepeats, 100*cShare, cRepeats)
	if cShare > 0.15 || cShare > dShare/2 {
		t.Errorf("clean_repeats 6: truly infeasible winner on %.0f%% of seeds (default %.0f%%), want at most 15%% and half the default's", 100*cShare, 100*dShare)
	}
	if cRepeats <= dRepeats {
		t.Errorf("clean_repeats 6 took %d repeats, the default %d: the leader's extra repeats are missing", cRepeats, dRepeats)
	}
}

// A fresh restart can be any recorded run of the configuration: the
// confirmation's repeats draw the reference runs too (Restarts), the
// search's never (Replay). A contender whose three sweep runs met the SLO
// and whose reference runs mostly break it (truly infeasible) is then
// found out by its repeats, and the configuration that holds up wins.
func TestConfirmationRepeatsAreFreshRestarts(t *testing.T) {
	head := `{"format":"batchtune-surface/1","name":"restart-fixture","source":"search/replay/confirm_test.go (unit-test fixture)","objective":"max_throughput","concurrency":32,"slo":"60ms","error_budget":0.01,"cores":2,"gpus":1,"space":[{"name":"max_batch_size","values":[4,8,16,32]},{"name":"batch_timeout_micros","values":[0,10000]}]}`
	lines := []string{head}
	add := func(b, tau int, qps float64, p99 int, n int, ref bool) {
		for range n {
			lines = append(lines, fmt.Sprintf(`{"config":[%d,%d],"qps":%g,"p99_us":%d,"error_rate":0,"reference":%v}`, b, tau, qps, p99, ref))
		}
	}
	add(32, 0, 3000, 50000, 3, false)
	add(32, 0, 3000, 90000, 12, true) // 12 of 15 runs break the SLO
	add(32, 0, 3000, 50000, 3, true)
	add(16, 10000, 1500, 30000, 3, false)
	add(16, 10000, 1500, 30000, 16, true)
	for _, c := range [][2]int{{4, 0}, {4, 10000}, {8, 0}, {8, 10000}, {16, 0}, {32, 10000}} {
		add(c[0], c[1], 300, 90000, 3, false)
	}
	s, err := Decode(strings.NewReader(strings.Join(lines, "\n")+"\n"), "restart-fixture")
	if err != nil {
		t.Fatal(err)
	}
	if tr, _ := s.Truth(cfg2(32, 0)); tr.Feasible {
		t.Fatalf("fixture: 32/0 truly feasible (%+v)", tr)
	}
	sweep, restarts, broke := s.Replay(1), s.Restarts(1), 0
	for range 60 {
		if tr, err := sweep.Run(cfg2(32, 0)); err != nil || !tr.Feasible {
			t.Fatalf("the search's replayer answered a reference run: %+v, %v", tr, err)
		}
		if tr, err := restarts.Run(cfg2(32, 0)); err != nil {
			t.Fatal(err)
		} else if !tr.Feasible {
			broke++
		}
	}
	if broke < 30 || broke > 55 {
		t.Errorf("restarts broke the SLO in %d of 60 draws, want about 40 (12 runs of 18)", broke)
	}
	ok := func(c search.Config, qps float64) search.Trial {
		return search.Trial{Config: c, Outcome: search.Succeeded, Measured: true, Feasible: true, Value: qps, QPS: qps}
	}
	hist := []search.Trial{ok(cfg2(32, 0), 3000), ok(cfg2(16, 10000), 1500)}
	c := configs.DefaultStudy().Confirmation
	lost := 0
	for seed := uint64(1); seed <= 200; seed++ {
		if won, _, _ := stage(t, s, &search.Random{}, hist, seed, c); !won.Equal(cfg2(16, 10000)) {
			lost++
		}
	}
	// It passes three clean repeats with (1/3)^3, or one breach in three
	// and none in three more with 6/27 × 1/27: 4.5%. Had the repeats
	// redrawn the sweep's runs only, it would win every time.
	if lost > 20 {
		t.Errorf("the truly infeasible 32/0 won the confirmation on %d of 200 seeds, want at most 20 (about 9)", lost)
	}
}
