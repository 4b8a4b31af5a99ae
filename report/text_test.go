package report_test

import (
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
