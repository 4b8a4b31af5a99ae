package main

import (
	"strings"
	"testing"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// A trial whose measurement stopped once it was certainly below the best
// so far says so on its line; one that ran to a stable verdict does not.
func TestTrialLineSaysDominatedStop(t *testing.T) {
	v := 827.0
	tr := store.Trial{Seq: 9, Role: store.RoleSearch, State: store.TrialSucceeded, Objective: &v, Feasible: true,
		Summary: store.Summary{Throughput: v}}
	for _, c := range []struct {
		measurement string
		want        bool
	}{
		{`{"stop_reason":"dominated","stop_detail":"throughput 827.0 req/s over 3 windows"}`, true},
		{`{"stop_reason":"stable"}`, false},
		{``, false},
	} {
		tr.Measurement = []byte(c.measurement)
		line := trialLine(tuner.Event{Stage: "search", Index: 9, Total: 12, Trial: &tr})
		if got := strings.Contains(line, "certainly below the best so far"); got != c.want {
			t.Errorf("measurement %s: line %q, want the dominated note %v", c.measurement, line, c.want)
		}
	}
}
