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
