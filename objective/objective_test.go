package objective_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/objective"
)

func TestKinds(t *testing.T) {
	if diff := cmp.Diff([]string{"max_throughput", "min_latency", "max_capacity"}, objective.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	// configs' spellings are the names declared here.
	for name, want := range map[configs.Objective]objective.Kind{
		configs.ObjectiveMaxThroughput: objective.MaxThroughput,
		configs.ObjectiveMinLatency:    objective.MinLatency,
		configs.ObjectiveMaxCapacity:   objective.MaxCapacity,
	} {
		if got, err := name.Kind(); err != nil || got != want {
			t.Errorf("%s.Kind() = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, k := range objective.Kinds() {
		b, err := k.MarshalText()
		var back objective.Kind
		if err != nil || back.UnmarshalText(b) != nil || back != k {
			t.Errorf("%v → %q → %v (%v)", k, b, back, err)
		}
	}
	if _, err := objective.Parse("capacity"); err == nil || !strings.Contains(err.Error(), "use max_throughput, min_latency or max_capacity") {
		t.Errorf("Parse(capacity): %v", err)
	}
	if _, err := objective.Kind(7).MarshalText(); err == nil {
		t.Error("an undeclared kind marshalled")
	}
}

func TestBehaviour(t *testing.T) {
	tests := []struct {
		k        objective.Kind
		dir      objective.Direction
		open     bool
		value    float64 // of 900 req/s at 2.5ms
		format   string  // of 0.0025 (or 1234.56)
		wrongFor bool    // the load shape CheckLoad refuses (open loop?)
		holds    bool    // measured with load.concurrency in flight
	}{
		// Throughput: more is better, closed loop, the QPS, req/s.
		{objective.MaxThroughput, objective.Maximize, false, 900, "1234.6 req/s", true, true},
		// Latency: less is better, open loop, the quantile in seconds.
		{objective.MinLatency, objective.Minimize, true, 0.0025, "p99 2.5ms", false, false},
		// Capacity: more is better, its burst closed loop, the rate, req/s;
		// the rate is measured open loop, with no fixed rows in flight.
		{objective.MaxCapacity, objective.Maximize, false, 900, "1234.6 req/s", true, false},
	}
	for _, tt := range tests {
		if tt.k.Direction() != tt.dir || tt.k.OpenLoop() != tt.open {
			t.Errorf("%v: direction %v, open loop %v", tt.k, tt.k.Direction(), tt.k.OpenLoop())
		}
		if tt.k.HoldsConcurrency() != tt.holds {
			t.Errorf("%v: HoldsConcurrency = %v", tt.k, tt.k.HoldsConcurrency())
		}
		if got := tt.k.Value(900, 2500*time.Microsecond); got != tt.value {
			t.Errorf("%v: Value = %v, want %v", tt.k, got, tt.value)
		}
		v := 1234.56
		if tt.dir == objective.Minimize {
			v = 0.0025
		}
		if got := tt.k.Format(v, "p99"); got != tt.format {
			t.Errorf("%v: Format = %q, want %q", tt.k, got, tt.format)
		}
		if tt.k.CheckLoad(tt.open) != "" || !strings.HasPrefix(tt.k.CheckLoad(!tt.open), tt.k.String()+" needs ") {
			t.Errorf("%v: CheckLoad(%v) = %q, CheckLoad(%v) = %q", tt.k, tt.open, tt.k.CheckLoad(tt.open), !tt.open, tt.k.CheckLoad(!tt.open))
		}
		o := objective.Objective{Kind: tt.k}
		if o.Better(1, 2) != (tt.dir == objective.Minimize) || o.Better(2, 2) {
			t.Errorf("%v: Better wrong", tt.k)
		}
	}
	if got := objective.MinLatency.Cell(0.0125); got != "12.5ms" {
		t.Errorf("latency cell %q", got)
	}
	if got := objective.MaxThroughput.Cell(12.345); got != "12.3" {
		t.Errorf("throughput cell %q", got)
	}
}

func TestValidate(t *testing.T) {
	var ps configs.Problems
	err := objective.Objective{Kind: objective.MinLatency, ErrorBudget: 1.5}.Validate()
	if !errors.As(err, &ps) || len(ps) != 2 || ps[0].Field != "objective.error_budget" || ps[1].Field != "objective.rate" {
		t.Errorf("Validate: %v", err)
	}
	if err := (objective.Objective{Kind: objective.MaxThroughput, ErrorBudget: 0.01}).Validate(); err != nil {
		t.Errorf("a valid objective: %v", err)
	}
	if err := (objective.Objective{}).Validate(); err == nil || !strings.Contains(err.Error(), "objective.kind: must be max_throughput, min_latency or max_capacity") {
		t.Errorf("no kind: %v", err)
	}
}
