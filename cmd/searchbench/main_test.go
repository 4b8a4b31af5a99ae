package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/search/replay"
)

// writeFixture writes a UNIT-TEST FIXTURE surface (a closed-form toy, not
// a measurement) of 24 configurations, 2 runs each, and returns its path.
func writeFixture(t *testing.T) string {
	t.Helper()
	s, err := replay.NewSurface(replay.Header{
		Format: replay.Format, Name: "cmd-fixture", Source: "cmd/searchbench/main_test.go (unit-test fixture)",
		Objective: search.MaxThroughput, Concurrency: 16, SLO: replay.Duration(20 * time.Millisecond),
		ErrorBudget: 0.01, Cores: 2, GPUs: 1,
		Space: []configs.ParamSpec{
			{Name: search.MaxBatchSize, Values: []int64{2, 4, 8, 16}},
			{Name: search.BatchTimeoutMicros, Values: []int64{0, 2000, 5000}},
			{Name: search.NumBatchThreads, Values: []int64{1, 2}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.Space().Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range all {
		b, _ := c.Get(search.MaxBatchSize)
		tau, _ := c.Get(search.BatchTimeoutMicros)
		n, _ := c.Get(search.NumBatchThreads)
		for rep := range 2 {
			qps := 100 * math.Log2(float64(b)+1) * float64(n) * (1 + 0.02*float64(rep))
			p99 := 2000 + 1.5*float64(tau) + 500*float64(b)
			if err := s.Add(replay.Measurement{Config: []int64{b, tau, n}, QPS: qps, P99Micros: p99, OOM: b == 16 && n == 2 && i%2 == 0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := s.Encode(f); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunPrintsATablePerSurface(t *testing.T) {
	path := writeFixture(t)
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"-seeds", "3", "-budget", "6", "-set", "bayes.init=3", path, path}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	got := out.String()
	if n := strings.Count(got, "surface cmd-fixture"); n != 2 {
		t.Errorf("%d tables, want 2:\n%s", n, got)
	}
	for _, name := range search.Names() {
		if !strings.Contains(got, "\n"+name+" ") {
			t.Errorf("no row for %s:\n%s", name, got)
		}
	}
}

func TestRunJSON(t *testing.T) {
	path := writeFixture(t)
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-json", "-seeds", "2", "-budget", "5", "-strategies", "grid,random", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	var reps []struct {
		Surface string `json:"surface"`
		Rows    []struct {
			Strategy string     `json:"strategy"`
			Median   []*float64 `json:"median"`
			Runs     []struct {
				Seed   uint64 `json:"seed"`
				Trials int    `json:"trials"`
			} `json:"runs"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &reps); err != nil {
		t.Fatalf("output is not the JSON report: %v\n%s", err, out.String())
	}
	if len(reps) != 1 || len(reps[0].Rows) != 2 || reps[0].Rows[1].Strategy != "random" || len(reps[0].Rows[1].Runs) != 2 {
		t.Errorf("unexpected report: %+v", reps)
	}
	for _, r := range reps[0].Rows[0].Runs {
		if r.Trials < 5 {
			t.Errorf("grid seed %d ran %d trials, under the budget", r.Seed, r.Trials)
		}
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	path := writeFixture(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(`{"format":"nope"}`+"\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		// No surface named.
		{"no files", nil, 2, "name at least one surface file"},
		// An unknown strategy, an unknown setting, a setting for a strategy not run.
		{"unknown strategy", []string{"-strategies", "annealing", path}, 2, "unknown strategy"},
		{"unknown setting", []string{"-set", "bayes.temperature=3", path}, 2, "search.settings.temperature"},
		{"setting for absent strategy", []string{"-strategies", "grid", "-set", "bayes.init=3", path}, 2, `strategy "bayes"`},
		{"malformed set", []string{"-set", "init=3", path}, 2, "strategy.setting=value"},
		{"bad targets", []string{"-targets", "0.95,1.5", path}, 2, "fractions in (0, 1]"},
		// Confirmation settings: a bad value names its key; an unknown key; without -confirm.
		{"bad confirmation value", []string{"-confirm", "-confirmation", "repeats=1", path}, 2, "confirmation.repeats: must be >= 2, got 1"},
		{"bad clean_repeats", []string{"-confirm", "-confirmation", "clean_repeats=21", path}, 2, "confirmation.clean_repeats: must be between 0 and 20 (0 keeps the default verdict on the SLO), got 21"},
		{"confirmation value not a number", []string{"-confirm", "-confirmation", "top_k=three", path}, 2, `top_k: not a number: "three"`},
		{"unknown confirmation key", []string{"-confirm", "-confirmation", "repeat=3", path}, 2, `unknown key "repeat"`},
		{"confirmation without -confirm", []string{"-confirmation", "repeats=3", path}, 2, "needs -confirm"},
		// Files: missing, malformed (named with its line).
		{"missing file", []string{"/nonexistent/s.jsonl"}, 1, "/nonexistent/s.jsonl"},
		{"bad file", []string{bad}, 1, bad + ":1: header: format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(t.Context(), tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, errb.String(), tc.code, tc.want)
			}
		})
	}
}

// -compare reads -json outputs back: grid against random from one run, per
// surface and target, with the Mann-Whitney verdict. On the fixture grid
// reaches nothing within the horizon (its best configurations come last
// in grid order), so random wins every comparison; grid against itself
// wins and loses none.
func TestRunCompare(t *testing.T) {
	path := writeFixture(t)
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-json", "-seeds", "20", "-budget", "5", "-horizon", "5", "-strategies", "grid,random", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	js := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(js, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{js + ":grid", js + ":random"}, []string{"new (random) against old (grid)", "cmd-fixture", ">5 [", "won", "won 2, lost 0 of 2 comparisons", "after Holm's correction for 2 comparisons: won 2, lost 0",
			"the pick after the budget, new (random) against old (grid)", "cmd-fixture  20/20  0.388  0.776", "picks: won 1, lost 0 of 1 (p < 0.05); after Holm's correction: won 1, lost 0"}},
		{[]string{js + ":random", "--", js + ":grid"}, []string{"lost", "won 0, lost 2 of 2 comparisons", "the widest significant loss: cmd-fixture", "picks: won 0, lost 1 of 1"}},
		{[]string{js, js}, []string{"won 0, lost 0 of 2 comparisons", "after Holm's correction for 2 comparisons: won 0, lost 0", "picks: won 0, lost 0 of 1"}},
	} {
		out.Reset()
		errb.Reset()
		if code := run(t.Context(), append([]string{"-compare"}, tc.args...), &out, &errb); code != 0 {
			t.Fatalf("-compare %v: exit %d, stderr:\n%s", tc.args, code, errb.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("-compare %v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	// With -confirm on both sides a third table compares the confirmation
	// stage's winners; against a side without it, there is none.
	out.Reset()
	if code := run(t.Context(), []string{"-json", "-confirm", "-seeds", "20", "-budget", "5", "-horizon", "5", "-strategies", "grid,random", path}, &out, &errb); code != 0 {
		t.Fatalf("-confirm: exit %d, stderr:\n%s", code, errb.String())
	}
	// -confirmation changes the stage's settings, recorded with the report.
	var five bytes.Buffer
	if code := run(t.Context(), []string{"-json", "-confirm", "-confirmation", "repeats=5,max_repeats=5,top_k=2", "-seeds", "3", "-budget", "5", "-horizon", "5", "-strategies", "grid", path}, &five, &errb); code != 0 {
		t.Fatalf("-confirmation: exit %d, stderr:\n%s", code, errb.String())
	}
	var fives []jsonReport
	if err := json.Unmarshal(five.Bytes(), &fives); err != nil || fives[0].Confirm == nil || fives[0].Confirm.Repeats != 5 || fives[0].Confirm.TopK != 2 ||
		fives[0].Rows[0].Confirmed == nil || fives[0].Rows[0].Confirmed.Repeats < 10 {
		t.Errorf("-confirmation repeats=5,top_k=2: %v; want the settings recorded and at least 5 repeats of each candidate:\n%.600s", err, five.String())
	}
	cjs := filepath.Join(t.TempDir(), "confirm.json")
	if err := os.WriteFile(cjs, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var reps []jsonReport
	if err := json.Unmarshal(out.Bytes(), &reps); err != nil || reps[0].Confirm == nil || reps[0].Confirm.TopK != configs.DefaultStudy().Confirmation.TopK || reps[0].Rows[0].Confirmed == nil || reps[0].Rows[0].Confirmed.Repeats < 6 {
		t.Fatalf("-confirm -json: %v; want the settings and the repeats recorded:\n%.600s", err, out.String())
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{{[]string{cjs + ":grid", cjs + ":random"}, true}, {[]string{js + ":grid", cjs + ":random"}, false}} {
		out.Reset()
		if code := run(t.Context(), append([]string{"-compare"}, tc.args...), &out, &errb); code != 0 {
			t.Fatalf("-compare %v: exit %d, stderr:\n%s", tc.args, code, errb.String())
		}
		got := strings.Contains(out.String(), "the confirmed recommendation (the confirmation stage's winner after the budget), new (random) against old (grid)") &&
			strings.Contains(out.String(), "\nconfirmed: won ")
		if got != tc.want {
			t.Errorf("-compare %v: confirmed table %v, want %v:\n%s", tc.args, got, tc.want, out.String())
		}
	}
	// Two confirmation settings compared: the table says which ran where.
	fjs := filepath.Join(t.TempDir(), "five.json")
	if err := os.WriteFile(fjs, five.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"-compare", cjs + ":grid", fjs + ":grid"}, &out, &errb); code != 0 {
		t.Fatalf("-compare of two confirmation settings: exit %d, stderr:\n%s", code, errb.String())
	}
	if want := fmt.Sprintf("old confirmed with top_k %d, repeats 3, max_repeats 6, clean_repeats 0, confidence 0.95, new with top_k 2, repeats 5, max_repeats 5, clean_repeats 0", configs.DefaultStudy().Confirmation.TopK); !strings.Contains(out.String(), want) {
		t.Errorf("-compare of two confirmation settings lacks %q:\n%s", want, out.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{js}, "wants OLD.json NEW.json"},
		{[]string{js + ":annealing", js}, `no row for strategy "annealing"`},
		{[]string{path, js}, "not searchbench -json output"},
	} {
		errb.Reset()
		if code := run(t.Context(), append([]string{"-compare"}, tc.args...), &out, &errb); code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("-compare %v: exit %d, stderr %q; want a failure naming %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// -truth prints a configuration's truth and its share of the best, in
// any parameter order, and refuses a value the space lacks or a missing
// parameter, naming it.
func TestRunTruth(t *testing.T) {
	path := writeFixture(t)
	var out, errb bytes.Buffer
	// The fixture's QPS grows with the batch and the threads: the best
	// truly feasible is not max_batch_size 2 with one thread, which serves
	// log2(3)/log2(5)/2 of max_batch_size 4 with two.
	args := []string{"-truth", "num_batch_threads=1,max_batch_size=2,batch_timeout_micros=0", path}
	if code := run(t.Context(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	for _, w := range []string{"cmd-fixture: best ", "max_batch_size=2 batch_timeout_micros=0 num_batch_threads=1: ", "of the best, truly feasible"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "1.000 of the best") {
		t.Errorf("the smallest batch with one thread reads as the best:\n%s", out.String())
	}
	for _, tc := range []struct{ cfg, want string }{
		{"max_batch_size=3,batch_timeout_micros=0,num_batch_threads=1", "max_batch_size=3: not one of the space's values"},
		{"max_batch_size=2,batch_timeout_micros=0", "num_batch_threads: missing"},
		{"max_batch_size=2,batch_timeout_micros=0,num_batch_threads=1,queue=3", "queue: not a parameter"},
	} {
		errb.Reset()
		if code := run(t.Context(), []string{"-truth", tc.cfg, path}, &out, &errb); code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("-truth %s: exit %d, stderr %q; want a failure naming %q", tc.cfg, code, errb.String(), tc.want)
		}
	}
}

// -trace prints seed K's run trial by trial: numbered from 1 up to the
// horizon, each with what it measured, its truth's share of the best and
// the strategy's reason; it takes one strategy only.
func TestRunTrace(t *testing.T) {
	path := writeFixture(t)
	var out, errb bytes.Buffer
	args := []string{"-strategies", "hillclimb", "-trace", "2", "-budget", "4", "-horizon", "4", path}
	if code := run(t.Context(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "cmd-fixture, hillclimb") || !strings.HasSuffix(lines[0], "seed 2:") {
		t.Fatalf("want a heading and 4 trials, got:\n%s", out.String())
	}
	for i, l := range lines[1:] {
		if !strings.HasPrefix(strings.TrimSpace(l), fmt.Sprint(i+1)+"  ") || !strings.Contains(l, "of the best (feasible ") {
			t.Errorf("trial line %d: %q", i+1, l)
		}
	}
	if !strings.Contains(lines[1], "start") {
		t.Errorf("hill-climbing's first trial should give its start as the reason: %q", lines[1])
	}
	errb.Reset()
	if code := run(t.Context(), []string{"-strategies", "hillclimb,random", "-trace", "1", path}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-trace: name one strategy") {
		t.Errorf("-trace with two strategies: exit %d, stderr %q; want 2 and a clear error", code, errb.String())
	}
}
