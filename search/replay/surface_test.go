package replay

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/search"
)

func TestSurfaceRoundTrip(t *testing.T) {
	for _, s := range []*Surface{smallSurface(t, 1, 3), syntheticCPUSurface(t, 2, 2)} {
		var buf bytes.Buffer
		if err := s.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := Decode(bytes.NewReader(buf.Bytes()), "mem")
		if err != nil {
			t.Fatalf("%s: Decode of Encode's output: %v", s.Name, err)
		}
		if diff := cmp.Diff(s.Header, back.Header); diff != "" {
			t.Errorf("%s: header (-want +got):\n%s", s.Name, diff)
		}
		if diff := cmp.Diff(s.Points(), back.Points()); diff != "" {
			t.Errorf("%s: points (-want +got):\n%s", s.Name, diff)
		}
		var again bytes.Buffer
		if err := back.Encode(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), again.Bytes()) {
			t.Errorf("%s: re-encoding differs", s.Name)
		}
	}
}

// tinyHeader is a surface over max_batch_size {8, 16} × timeout {0, 30000}
// with a 60 ms SLO: 30000 µs breaks SLO/3, so two configurations must be
// recorded.
const tinyHeader = `{"format":"batchtune-surface/1","name":"tiny","source":"test","objective":"max_throughput","concurrency":8,"slo":"60ms","error_budget":0.01,"cores":2,"gpus":1,"space":[{"name":"max_batch_size","values":[8,16]},{"name":"batch_timeout_micros","values":[0,30000]}]}`

// tinyConfig is the configuration max_batch_size mbs, timeout 0 of the
// tiny surfaces' and testdata's spaces.
func tinyConfig(mbs int64) search.Config {
	return search.Config{{Name: search.MaxBatchSize, Value: mbs}, {Name: search.BatchTimeoutMicros, Value: 0}}
}

func tinyLines(lines ...string) string {
	return tinyHeader + "\n" + strings.Join(lines, "\n") + "\n"
}

const (
	line8  = `{"config":[8,0],"qps":100,"p99_us":20000,"error_rate":0}`
	line16 = `{"config":[16,0],"qps":150,"p99_us":70000,"error_rate":0}`
)

func TestDecodeReportsFileLineAndField(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error, in order
	}{
		// An empty file has no header.
		{"empty", "", []string{"f.jsonl:1: empty file"}},
		// A header with an unknown key, and one with bad values, all named.
		{"unknown header key", `{"format":"batchtune-surface/1","nme":"x"}` + "\n", []string{"f.jsonl:1: header:", `unknown field "nme"`}},
		{"bad header values", `{"format":"v0","name":"","objective":"max_throughput","slo":"-1s","error_budget":2,"cores":0,"space":[]}` + "\n",
			[]string{"f.jsonl:1: header: format:", "f.jsonl:1: header: name:", "f.jsonl:1: header: concurrency:", "f.jsonl:1: header: error_budget:", "f.jsonl:1: header: slo:", "f.jsonl:1: header: cores:", "f.jsonl:1: header: space:"}},
		// Measurement lines: each problem on its own line number.
		{"bad lines", tinyLines(line8, `{"config":[8],"qps":1,"p99_us":1}`, `{"config":[8,5],"qps":1,"p99_us":1}`, `{"config":[16,0],"qps":-1,"p99_us":1}`, `{"config":[16,0],"qps":1,"p99_us":1,"extra":1}`, `not json`),
			[]string{"f.jsonl:3: config has 1 values", "f.jsonl:4: config", "not a point of the space", "f.jsonl:5: qps, p99_us and error_rate must be finite", `f.jsonl:6: json: unknown field "extra"`, "f.jsonl:7: invalid character"}},
		// A configuration that breaks SLO/3 is not a point to record (it
		// is never run), but it is in the space: accepted. A runnable one
		// missing is not.
		{"missing runnable", tinyLines(line8, `{"config":[8,30000],"qps":1,"p99_us":1}`), []string{"1 of the 2 runnable configurations of the space are not recorded (e.g. max_batch_size=16 batch_timeout_micros=0)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.in), "f.jsonl")
			if err == nil {
				t.Fatal("Decode accepted a bad file")
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("err does not wrap ErrFormat: %v", err)
			}
			msg := err.Error()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error lacks %q (in order) in:\n%s", w, msg)
				}
				at += i + len(w)
			}
		})
	}
}

func TestTruth(t *testing.T) {
	s, err := Decode(strings.NewReader(tinyLines(
		line8, `{"config":[8,0],"qps":120,"p99_us":40000,"error_rate":0.02}`,
		line16, `{"config":[16,0],"load_failed":true,"qps":0,"p99_us":0,"error_rate":0}`,
	)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	c8 := search.Config{{Name: search.MaxBatchSize, Value: 8}, {Name: search.BatchTimeoutMicros, Value: 0}}
	got, ok := s.Truth(c8)
	if !ok {
		t.Fatal("no truth for a recorded configuration")
	}
	// Means: 110 QPS, P99 30 ms, error rate 0.01 (= budget: feasible).
	want := Truth{QPS: 110, P99: 30 * time.Millisecond, ErrorRate: 0.01, Feasible: true, Value: 110}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("truth (-want +got):\n%s", diff)
	}
	// One failed run of two makes the configuration truly infeasible.
	c16 := search.Config{{Name: search.MaxBatchSize, Value: 16}, {Name: search.BatchTimeoutMicros, Value: 0}}
	if got, _ := s.Truth(c16); !got.Failed || got.Feasible {
		t.Errorf("truth of a sometimes-failing configuration %+v, want failed and infeasible", got)
	}
	best, bt, ok := s.Best()
	if !ok || !best.Equal(c8) || bt.Value != 110 {
		t.Errorf("Best = %v %+v %v, want %v at 110 QPS", best, bt, ok, c8)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(tinyLines(line8, line16)))
	f.Add([]byte(tinyHeader))
	f.Add([]byte(`{"format":"batchtune-surface/1"}` + "\n" + line8))
	for _, path := range []string{"testdata/v1.jsonl", "testdata/capacity.jsonl"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(bytes.NewReader(data), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := s.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := Decode(&buf, "again")
		if err != nil {
			t.Fatalf("re-decoding an accepted surface: %v", err)
		}
		if diff := cmp.Diff(s.Points(), back.Points()); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// TestResolution: one run's coefficient of variation among the best
// feasible configurations, the median of them; an infeasible or single-run
// configuration does not count.
func TestResolution(t *testing.T) {
	in := tinyLines(
		// 8,0: runs 90 and 110 → mean 100, sample sd 14.14 → CV 0.1414
		`{"config":[8,0],"qps":90,"p99_us":20000,"error_rate":0}`,
		`{"config":[8,0],"qps":110,"p99_us":20000,"error_rate":0}`,
		// 16,0: runs 198 and 202 → CV 0.01414
		`{"config":[16,0],"qps":198,"p99_us":20000,"error_rate":0}`,
		`{"config":[16,0],"qps":202,"p99_us":20000,"error_rate":0}`,
	)
	s, err := Decode(strings.NewReader(in), "f.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Resolution(), (math.Sqrt(200)/100+math.Sqrt(8)/200)/2; math.Abs(got-want) > 1e-9 {
		t.Errorf("Resolution = %v, want the median of the two CVs %v", got, want)
	}
	// The noisy one breaks the SLO: only the steady one counts.
	in = strings.Replace(in, `"qps":90,"p99_us":20000`, `"qps":90,"p99_us":200000`, 1)
	if s, err = Decode(strings.NewReader(in), "f.jsonl"); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Resolution(), math.Sqrt(8)/200; math.Abs(got-want) > 1e-9 {
		t.Errorf("with the noisy configuration infeasible: Resolution = %v, want %v", got, want)
	}
}
