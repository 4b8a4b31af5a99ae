package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/store"
)

func TestThroughputNeverReadsZero(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     store.Summary
		state store.TrialState
		want  string
	}{
		// a measured rate is shown as it is
		{"measured", store.Summary{Throughput: 412.34, Requests: 900}, store.TrialSucceeded, "412.3 req/s"},
		// nothing came back at all
		{"no request", store.Summary{}, store.TrialSucceeded, "— (no request completed)"},
		// everything came back failed
		{"all failed", store.Summary{Requests: 50, ErrorRate: 1}, store.TrialSucceeded, "— (every request failed)"},
		// a batch and a P99 but the stop rule ended it first: the bug's case
		{"early stop", store.Summary{Requests: 40, P99: 180 * time.Millisecond, MeanBatch: 16}, store.TrialEarlyStopped, "— (stopped early, before a rate was measured)"},
		// successes, but none inside the window
		{"outside window", store.Summary{Requests: 40, P99: time.Second}, store.TrialSucceeded, "— (no success inside the measured window)"},
	} {
		if got := report.Throughput(tc.s, tc.state); got != tc.want {
			t.Errorf("%s: Throughput = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestGainText(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    store.Recommendation
		want string
	}{
		// an interval at the stated confidence
		{"bounded", store.Recommendation{Gain: 0.25, GainLow: 0.1, GainHigh: 0.4, Confidence: 0.9}, "+25.0% (90% interval +10.0% to +40.0%)"},
		// one repeat: no interval
		{"unbounded", store.Recommendation{Gain: 0.25, GainLow: 0.25, GainHigh: 0.25, Confidence: 0.9}, "+25.0% (no interval)"},
		// the baseline broke the SLO: the tuner stated no gain
		{"none", store.Recommendation{}, "none stated (the baseline broke the SLO or measured nothing to compare with; see why)"},
	} {
		if got := report.GainText(&tc.r); got != tc.want {
			t.Errorf("%s: GainText = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTrialTableShowsNodesOnlyWhenKnown: trials that ran on named nodes
// (parallel trials on a cluster) get a node column; others do not.
func TestTrialTableShowsNodesOnlyWhenKnown(t *testing.T) {
	v := 100.0
	trials := []store.Trial{
		{Seq: 1, Role: store.RoleSearch, State: store.TrialSucceeded, Objective: &v, Summary: store.Summary{Throughput: v}},
		{Seq: 2, Role: store.RoleSearch, State: store.TrialRejected},
	}
	var b strings.Builder
	report.WriteTrialTable(&b, trials)
	if strings.Contains(b.String(), "node") {
		t.Errorf("a node column with no node known:\n%s", b.String())
	}
	trials[0].Node = "gpu-node-7"
	b.Reset()
	report.WriteTrialTable(&b, trials)
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "node") || !strings.Contains(lines[1], "gpu-node-7") || !strings.Contains(lines[2], " - ") {
		t.Errorf("want a node column, the node on trial 1 and - on trial 2:\n%s", b.String())
	}
}
