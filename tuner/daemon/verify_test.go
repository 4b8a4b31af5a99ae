package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// TestScheduleVerify: a study with schedule.verify runs with the soak as
// its Verifier, one without runs with none; a run whose soak failed ends
// kept, rolls nothing out, and status says why.
func TestScheduleVerify(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	log := filepath.Join(r.out, "rollout.log")
	bin := filepath.Join(r.out, "rollout.sh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$1\" >> "+log+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.write("v.yaml", studyDoc("v", "/bin/a", 0, 0, "* * * * *", "UTC", filepath.Join(r.out, "v.config"), bin)+
		"  verify: {enabled: true, rate: 50, duration: 6s, interval: 2s}\n")
	r.write("plain.yaml", studyDoc("plain", "/bin/b", 9500, 9501, "* * * * *", "UTC", filepath.Join(r.out, "p.config")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.clock.Set(at(t, "2026-01-01T00:01:00Z"))
	why := "acceptance soak failed (verification 1): interval 2 (2s-4s): P99 90.0ms over the SLO 100ms; likely cause: queue_full: ...; the incumbent is kept"
	for range 2 {
		run := r.runner.next(t)
		switch run.Study.Name {
		case "v":
			if run.Opts.Verify == nil {
				t.Errorf("study v has schedule.verify but its run has no Verifier")
			}
			run.finishWith(ending{outcome: store.OutcomeKept, objective: 100,
				decision: &tuner.Decision{Kept: true, Message: why}})
		case "plain":
			if run.Opts.Verify != nil {
				t.Errorf("study plain has no schedule.verify but its run has a Verifier")
			}
			run.finishWith(ending{outcome: store.OutcomeKept, objective: 100})
		}
	}
	r.waitFor("v's run end", func() bool { return r.status("v").LastOutcome == string(store.OutcomeKept) })
	st := r.status("v")
	if st.LastDecision == nil || !strings.Contains(st.LastDecision.Message, "acceptance soak failed") {
		t.Errorf("status decision %+v, want the soak's failure", st.LastDecision)
	}
	if st.LastRollout != nil {
		t.Errorf("rollout %+v after a failed soak, want none", st.LastRollout)
	}
	if data, err := os.ReadFile(log); err == nil {
		t.Errorf("rollout ran after a failed soak: %q", data)
	}
}

// TestAPIVerifications lists a study's soaks with their verdicts and
// causes; none before the first.
func TestAPIVerifications(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{})
	a.start()
	path := daemon.PathAPI + "/studies/s/verifications"
	a.check(t, []apiCase{
		{"verifications, none yet", "GET", path, "", "", 200, `[]`},
		{"verifications of unknown study", "GET", daemon.PathAPI + "/studies/nope/verifications", "", "", 404, `unknown study`},
	})
	ctx := context.Background()
	if err := a.db.PutStudy(ctx, &store.Study{Name: "s", SpecHash: "h"}); err != nil {
		t.Fatal(err)
	}
	v := &store.Verification{Study: "s", Source: "--config x", Verdict: store.VerifyFailed, Causes: []store.Cause{{Name: "queue_full", Detail: "refused"}}}
	if err := a.db.AddVerification(ctx, v); err != nil {
		t.Fatal(err)
	}
	a.check(t, []apiCase{
		{"verifications", "GET", path, "", "", 200, `"name": "queue_full"`},
	})
}
