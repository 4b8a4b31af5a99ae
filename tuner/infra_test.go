package tuner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// TestInfraFailureInConfirmationIsRetried: a confirmation repeat whose
// server could not be started is measured again, kept as a failed trial
// with its reason, and not counted against the configuration: every
// candidate still has all its repeats, and the run recommends.
func TestInfraFailureInConfirmationIsRetried(t *testing.T) {
	infraRetryPause = 0
	s := testStudy(t, "")
	db := storetest.Open(t)
	var mu sync.Mutex
	confirming, failed := false, 0
	rt := &fakeRuntime{startErr: func(runtime.Config) error {
		mu.Lock()
		defer mu.Unlock()
		if confirming && failed < 2 {
			failed++
			return errors.New("create container: connection reset by peer")
		}
		return nil
	}}
	p := &fakeProber{rt: rt, surface: testSurface}
	tu := newTestTuner(t, s, db, rt, p, func(e Event) {
		if e.Stage == StageConfirm {
			mu.Lock()
			confirming = true
			mu.Unlock()
		}
	})
	rep, err := tu.Run(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if failed != 2 {
		t.Fatalf("%d starts failed, want 2: the test tests nothing", failed)
	}
	if rep.Recommendation == nil {
		t.Fatalf("no recommendation: %s", rep.Run.Detail)
	}
	for _, c := range append(append([]Candidate(nil), rep.Confirmation.Candidates...), rep.Confirmation.Baseline) {
		if c.Repeats != 3 {
			t.Errorf("%s: %d repeats counted, want 3 (the failed starts are not counted)", c.Label, c.Repeats)
		}
		for _, r := range c.Reasons {
			if strings.Contains(r, "connection reset") {
				t.Errorf("%s: the infrastructure failure is among its reasons: %q", c.Label, r)
			}
		}
	}
	var infra, retried int
	for _, tr := range rep.Trials {
		if tr.State == store.TrialFailed && strings.Contains(tr.Reason, "connection reset") {
			infra++
		}
		if strings.HasSuffix(tr.Why, infraRetryNote) {
			retried++
		}
	}
	if infra != 2 || retried != 2 {
		t.Errorf("%d failed trials kept and %d retries, want 2 and 2", infra, retried)
	}
}

// TestInfraFailureClassification: the machine's failures, not the
// configuration's.
func TestInfraFailureClassification(t *testing.T) {
	for _, tc := range []struct {
		reason, log string
		infra       bool
	}{
		{"start: docker: create container: connection reset", "", true},
		{"server exited: exit code 1", "Failed to bind to 0.0.0.0:8500: address already in use", true},
		{"server exited: killed by signal segmentation fault", "", true},
		{"probe: fake:3 not ready after 30s: unreachable: connection refused", "", true},
		{"server exited: exit code 1", "Resource exhausted: OOM when allocating tensor", false},
		{"p99 42ms over the SLO", "", false},
	} {
		tr := &store.Trial{State: store.TrialFailed, Reason: tc.reason, LogTail: tc.log}
		if got := infraFailure(tr); got != tc.infra {
			t.Errorf("%q / %q: infra %v, want %v", tc.reason, tc.log, got, tc.infra)
		}
	}
	if infraFailure(&store.Trial{State: store.TrialSucceeded, Reason: "start: x"}) {
		t.Error("a succeeded trial counted as an infrastructure failure")
	}
}
