package tuner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// TestVerifyBeforeExport: a recommendation that fails its acceptance soak
// is recorded, not accepted and not exported, and the run says why; one
// that passes is exported as before. The soak runs on the run's runtime
// with the recommendation's batching.config, and its record is stored.
func TestVerifyBeforeExport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict string
		err     error
		// accepted: the recommendation is exported and becomes the incumbent.
		accepted bool
	}{
		{"passes", store.VerifyPassed, nil, true},
		{"fails", store.VerifyFailed, nil, false},
		{"not judged", store.VerifyInvalid, nil, false},
		{"server did not start", store.VerifyError, errors.New("start: boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			exportPath := filepath.Join(dir, "batching.config")
			s := testStudy(t, "export: {path: "+exportPath+"}\n")
			db := storetest.Open(t)
			rt := &fakeRuntime{}
			tu := newTestTuner(t, s, db, rt, &fakeProber{rt: rt, surface: testSurface}, nil)
			var soaked *store.Recommendation
			verify := func(ctx context.Context, r runtime.Runtime, rec *store.Recommendation) (*store.Verification, error) {
				if r != runtime.Runtime(rt) {
					t.Errorf("the soak got another runtime")
				}
				soaked = rec
				v := &store.Verification{Study: s.Name, Run: rec.Run, Verdict: tc.verdict, Batching: rec.Batching,
					Failures: []string{"interval 2 (2s-4s): P99 90.0ms over the SLO 30.0ms"},
					Causes:   []store.Cause{{Name: "queue_full", Detail: "the server refused 12 requests"}}}
				if tc.verdict == store.VerifyPassed {
					v.Failures, v.Causes = nil, nil
				}
				return v, tc.err
			}
			rep, err := tu.Run(context.Background(), RunOptions{Verify: verify})
			if err != nil {
				t.Fatal(err)
			}
			if soaked == nil || rep.Recommendation == nil || soaked.Batching != rep.Recommendation.Batching {
				t.Fatalf("soaked %+v, recommended %+v: want the recommendation soaked", soaked, rep.Recommendation)
			}
			vs, err := db.Verifications(context.Background(), s.Name)
			if err != nil || len(vs) != 1 || vs[0].Verdict != tc.verdict || rep.Verification == nil {
				t.Fatalf("stored verifications %+v (%v), report's %+v: want the one soak", vs, err, rep.Verification)
			}
			_, statErr := os.Stat(exportPath)
			inc, incErr := db.Incumbent(context.Background(), s.Name)
			if tc.accepted {
				if rep.Run.Outcome != store.OutcomeRecommended || statErr != nil || incErr != nil || inc.Run != rep.Run.ID {
					t.Errorf("passed: outcome %s, export %v, incumbent %v: want recommended, exported, accepted", rep.Run.Outcome, statErr, incErr)
				}
				return
			}
			if rep.Run.Outcome != store.OutcomeKept || !strings.Contains(rep.Run.Detail, "acceptance soak") || !strings.Contains(rep.Run.Detail, "incumbent is kept") {
				t.Errorf("outcome %s %q, want kept with the soak's reason", rep.Run.Outcome, rep.Run.Detail)
			}
			if tc.verdict == store.VerifyFailed && !strings.Contains(rep.Run.Detail, "queue_full") {
				t.Errorf("detail %q lacks the likely cause", rep.Run.Detail)
			}
			if !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("export path: %v, want nothing written", statErr)
			}
			if !errors.Is(incErr, store.ErrNotFound) {
				t.Errorf("incumbent %+v, %v: want none (the recommendation is recorded, not accepted)", inc, incErr)
			}
			recs, _ := db.Recommendations(context.Background(), s.Name)
			if len(recs) != 1 || recs[0].Accepted || !strings.Contains(recs[0].Note, "acceptance soak") {
				t.Errorf("recommendations %+v: want one, not accepted, saying why", recs)
			}
		})
	}
}

// TestWarmStartVerifyFailureKeepsTheIncumbent: a warm start that would
// replace the incumbent keeps it when the challenger fails its soak; the
// export still holds the incumbent and the decision says why.
func TestWarmStartVerifyFailureKeepsTheIncumbent(t *testing.T) {
	dir := t.TempDir()
	export := filepath.Join(dir, "batching.config")
	s := testStudy(t, "export: {path: "+export+"}\nschedule: {trials: 4, accept_margin: 0.05, degradation_threshold: 0.1}\n")
	db := storetest.Open(t)
	ctx := context.Background()
	rt := &fakeRuntime{}
	first, err := newTestTuner(t, s, db, rt, &fakeProber{rt: rt, surface: testSurface}, nil).Run(ctx, RunOptions{WarmStart: true, Kind: store.KindScheduled})
	if err != nil || first.Recommendation == nil || !first.Recommendation.Accepted {
		t.Fatalf("first run: %+v, %v", first.Recommendation, err)
	}
	before, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}

	fail := func(ctx context.Context, _ runtime.Runtime, rec *store.Recommendation) (*store.Verification, error) {
		return &store.Verification{Study: s.Name, Run: rec.Run, Verdict: store.VerifyFailed,
			Failures: []string{"interval 1 (0s-10s): P99 45.0ms over the SLO 30.0ms"}}, nil
	}
	rt2 := &fakeRuntime{}
	rep, err := newTestTuner(t, s, db, rt2, &fakeProber{rt: rt2, surface: slowerSurface}, nil).Run(ctx, RunOptions{WarmStart: true, Kind: store.KindScheduled, Verify: fail})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Decision
	if d == nil || d.Accepted || !d.Kept || !strings.Contains(d.Message, "acceptance soak failed") {
		t.Fatalf("decision %+v: want kept for the failed soak", d)
	}
	if rep.Run.Outcome != store.OutcomeKept || rep.Recommendation == nil || rep.Recommendation.Accepted {
		t.Errorf("outcome %s, recommendation %+v: want kept, the challenger recorded not accepted", rep.Run.Outcome, rep.Recommendation)
	}
	inc, err := db.Incumbent(ctx, s.Name)
	if err != nil || inc.Run != first.Run.ID {
		t.Errorf("incumbent %+v, %v: want run %d's still", inc, err, first.Run.ID)
	}
	if after, _ := os.ReadFile(export); string(after) != string(before) {
		t.Errorf("export changed to %q after a failed soak, want the incumbent's %q", after, before)
	}
}
