package replay

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

// TestFormatV1StillReads: a file written in the first format (committed,
// never regenerated) reads, its truth is what it was, and it is written
// back in its own format.
func TestFormatV1StillReads(t *testing.T) {
	s, err := Load("testdata/v1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != FormatV1 || s.Header.Objective != objective.MaxThroughput {
		t.Fatalf("header %+v", s.Header)
	}
	c8 := search.Config{{Name: search.MaxBatchSize, Value: 8}, {Name: search.BatchTimeoutMicros, Value: 0}}
	tr, ok := s.Truth(c8)
	if !ok || tr.Value != 105 || !tr.Feasible {
		t.Errorf("truth of %s: %+v, want QPS 105, feasible", c8, tr)
	}
	best, bt, ok := s.Best()
	if !ok || bt.Value != 155 || best.Key() == c8.Key() {
		t.Errorf("best %s %+v: want mbs 16 at 155 req/s (mean P99 60 ms, at the SLO)", best, bt)
	}
	var buf bytes.Buffer
	if err := s.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"format":"batchtune-surface/1"`) {
		t.Errorf("re-encoded as %s", strings.SplitN(buf.String(), "\n", 2)[0])
	}
	// Capacity fields are a version 2 thing, on max_capacity surfaces only.
	raw, _ := os.ReadFile("testdata/v1.jsonl")
	bad := string(raw) + `{"config":[8,0],"qps":1,"p99_us":1,"error_rate":0,"capacity":3}` + "\n"
	if _, err := Decode(strings.NewReader(bad), "v1+capacity"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "v1+capacity:6: capacity, upper and steps belong to max_capacity surfaces") {
		t.Errorf("capacity on a max_throughput line: %v", err)
	}
	v1cap := strings.Replace(string(raw), "max_throughput", "max_capacity", 1)
	if _, err := Decode(strings.NewReader(v1cap), "v1cap"); err == nil || !strings.Contains(err.Error(), `max_capacity surfaces need format "batchtune-surface/2"`) {
		t.Errorf("a max_capacity header in format 1: %v", err)
	}
}

// TestCapacitySurface: a max_capacity surface's truth is the mean
// capacity over runs (feasible when above 0, failed runs making a
// configuration infeasible), replay answers with a run's capacity as the
// trial's value, and the file round-trips.
func TestCapacitySurface(t *testing.T) {
	s, err := Load("testdata/capacity.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mbs      int64
		value    float64
		feasible bool
	}{
		{8, 390, true},   // mean of 400 and 380
		{16, 250, true},  // one run met nothing, the other 500
		{4096, 0, false}, // out of memory at load
	} {
		tr, ok := s.Truth(tinyConfig(c.mbs))
		if !ok || tr.Value != c.value || tr.Feasible != c.feasible {
			t.Errorf("mbs %d: truth %+v, want value %g feasible %v", c.mbs, tr, c.value, c.feasible)
		}
	}
	if best, bt, _ := s.Best(); best.Key() != tinyConfig(8).Key() || bt.Value != 390 {
		t.Errorf("best %s at %g, want mbs 8 at 390", best, bt.Value)
	}

	// Over seeds, replay draws each of mbs 16's runs: capacity 0 is an
	// infeasible trial, 500 a feasible one with that value.
	seen := map[float64]bool{}
	for seed := uint64(1); seed <= 40; seed++ {
		tr, err := s.Replay(seed).Run(tinyConfig(16))
		if err != nil {
			t.Fatal(err)
		}
		if tr.Outcome != search.Succeeded || !tr.Measured || tr.Feasible != (tr.Value > 0) {
			t.Errorf("seed %d: %+v", seed, tr)
		}
		seen[tr.Value] = true
	}
	if !seen[0] || !seen[500] || len(seen) != 2 {
		t.Errorf("values replayed for mbs 16: %v, want 0 and 500", seen)
	}
	if tr, _ := s.Replay(1).Run(tinyConfig(4096)); tr.Outcome != search.Failed {
		t.Errorf("OOM configuration replayed as %+v", tr)
	}

	var buf bytes.Buffer
	if err := s.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(bytes.NewReader(buf.Bytes()), "mem")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.Points(), back.Points()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got := back.Points()[0].Runs[0].Steps; len(got) != 4 || !got[2].Meets || got[3].Meets {
		t.Errorf("steps after the round trip: %+v", got)
	}

	var out bytes.Buffer
	rep, err := Bench(t.Context(), s, BenchOptions{Strategies: []search.Strategy{&search.Random{}}, Seeds: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "best capacity (req/s) 390.0") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestCapacityLinesAreChecked: what a max_capacity line must and must not
// hold, each problem named with its file and line.
func TestCapacityLinesAreChecked(t *testing.T) {
	raw, err := os.ReadFile("testdata/capacity.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	header := strings.SplitN(string(raw), "\n", 2)[0]
	for _, c := range []struct{ line, want string }{
		{`{"config":[8,0],"qps":1,"p99_us":1,"error_rate":0}`, "capacity is required"},
		{`{"config":[8,0],"qps":1,"p99_us":1,"error_rate":0,"capacity":-1}`, "capacity must be finite and non-negative"},
		{`{"config":[8,0],"qps":1,"p99_us":1,"error_rate":0,"capacity":10,"upper":9}`, "upper 9 must be above the capacity 10"},
		{`{"config":[8,0],"qps":1,"p99_us":1,"error_rate":0,"capacity":10,"steps":[{"rate":0,"qps":0,"p99_us":0}]}`, "steps[0]: rate must be > 0"},
		{`{"config":[8,0],"qps":1,"p99_us":1,"error_rate":0,"capacity":10,"steps":[{"rate":5,"qps":0,"p99_us":0,"bogus":1}]}`, `unknown field "bogus"`},
	} {
		_, err := Decode(strings.NewReader(header+"\n"+c.line+"\n"), "cap.jsonl")
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "cap.jsonl:2: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want line 2 and %q", c.line, err, c.want)
		}
	}
}
