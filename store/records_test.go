package store

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRecordRoundTrip: every record type decodes to what was encoded, and
// its encoding starts with the record version.
func TestRecordRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	for i := range 200 {
		obj := rng.Float64() * 1000
		tr := Trial{
			Study: "s", Run: rng.Uint64(), Seq: rng.Uint64(), Role: RoleConfirm,
			Config:    []Param{{"max_batch_size", rng.Int64N(1024)}, {"batch_timeout_micros", rng.Int64()}},
			State:     TrialStates[rng.IntN(len(TrialStates))],
			Reason:    strings.Repeat("x", rng.IntN(5)),
			Phases:    []Phase{{TrialSuggested, at}, {TrialStarting, at.Add(time.Second)}},
			Objective: &obj, Feasible: rng.IntN(2) == 0,
			Summary:     Summary{Throughput: obj, P99: time.Duration(rng.Int64N(1e9)), ErrorRate: rng.Float64()},
			Measurement: json.RawMessage(`{"any":"thing","n":[1,2,3]}`),
		}
		if i%2 == 0 {
			tr.Objective, tr.Measurement, tr.Summary = nil, nil, Summary{}
		}
		b, err := encode(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), `{"schema":1,`) {
			t.Fatalf("encoding does not start with the version: %s", b)
		}
		var got Trial
		if err := decode(b, "trial", &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tr, got); diff != "" {
			t.Fatalf("trial round trip (-want +got):\n%s", diff)
		}
	}
	for _, v := range []any{
		Run{Study: "s", ID: 3, Kind: KindScheduled, State: RunFinished, Started: at, Ended: at.Add(time.Hour), Outcome: OutcomeKept, Recommendation: 2},
		Recommendation{Study: "s", Seq: 1, Run: 3, Time: at, Config: []Param{{"max_batch_size", 32}}, Batching: "max_batch_size { value: 32 }\n", Flags: []string{"--x=1"}, Gain: 0.2, GainLow: 0.1, GainHigh: 0.3, Accepted: true},
		Study{Name: "s", SpecHash: "sha256:00", Spec: "name: s\n# comment\n", Created: at, Updated: at},
	} {
		b, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		ptr := newLike(v)
		if err := decode(b, "record", ptr); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(v, deref(ptr)); diff != "" {
			t.Errorf("%T round trip (-want +got):\n%s", v, diff)
		}
	}
}

func newLike(v any) any {
	switch v.(type) {
	case Run:
		return new(Run)
	case Recommendation:
		return new(Recommendation)
	case Study:
		return new(Study)
	}
	panic("unexpected type")
}

func deref(p any) any {
	switch p := p.(type) {
	case *Run:
		return *p
	case *Recommendation:
		return *p
	case *Study:
		return *p
	}
	panic("unexpected type")
}

// TestKeyOrder: big-endian keys compare as their numbers do.
func TestKeyOrder(t *testing.T) {
	prev := key(0)
	for _, n := range []uint64{1, 2, 255, 256, 257, 65535, 65536, 1 << 40, 1<<64 - 1} {
		k := key(n)
		if string(k) <= string(prev) {
			t.Fatalf("key(%d) does not sort after the previous key", n)
		}
		if back, ok := seqOf(k); !ok || back != n {
			t.Fatalf("seqOf(key(%d)) = %d, %v", n, back, ok)
		}
		prev = k
	}
}

// TestPeekVersion reads the version from the prefix encode writes and
// falls back to a full decode for anything else.
func TestPeekVersion(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  bool
	}{
		{`{"schema":1,"a":2}`, 1, false},             // as encode writes it
		{`{"schema":12}`, 12, false},                 // no other field
		{`{"a":1,"schema":3}`, 3, false},             // another writer's order
		{`{"schema": 4 , "a": 1}`, 4, false},         // spaces
		{`{"schema":1x}`, 0, true},                   // broken after the prefix
		{`{}`, 0, false},                             // no version: decode says corrupt
		{`garbage`, 0, true},                         // not JSON
		{`{"schema":99999999999999999999}`, 0, true}, // out of range
	}
	for _, tt := range tests {
		env, err := peekVersion([]byte(tt.in))
		if (err != nil) != tt.err || (err == nil && env.Schema != tt.want) {
			t.Errorf("peekVersion(%s) = %d, %v; want %d, error %v", tt.in, env.Schema, err, tt.want, tt.err)
		}
	}
}
