package tuner

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Verifier runs the acceptance soak of rec on the run's runtime (already
// recovered; the run restores it) and returns its record. A record with
// any verdict but store.VerifyPassed, an error, or no record all mean the
// configuration was not verified. Package verify provides it; the daemon
// passes it for studies with schedule.verify.
type Verifier func(ctx context.Context, rt runtime.Runtime, rec *store.Recommendation) (*store.Verification, error)

// verifyBeforeExport runs the run's Verifier, if any, on rec before it is
// exported, and stores its record. When the soak does not pass, rec is
// marked not accepted with the reason, the decision (if any) says the
// incumbent is kept, and ok is false: the caller ends the run kept. err is
// ErrInterrupted when the run's context ended during the soak.
func (t *Tuner) verifyBeforeExport(ctx context.Context, rec *store.Recommendation, rep *Report) (ok bool, why string, err error) {
	if t.verify == nil || rec == nil {
		return true, "", nil
	}
	t.log.Info("verifying the recommendation before export", "run", rec.Run)
	t.observe(Event{Time: t.now(), Run: rec.Run, Message: fmt.Sprintf("run %d: acceptance soak of the recommendation", rec.Run)})
	v, verr := t.verify(ctx, t.rt, rec)
	if ctx.Err() != nil {
		return false, "", ErrInterrupted
	}
	if v != nil {
		if err := t.db.AddVerification(context.WithoutCancel(ctx), v); err != nil {
			return false, "", fmt.Errorf("store verification: %w", err)
		}
		rep.Verification = v
	}
	switch {
	case v != nil && v.Verdict == store.VerifyPassed && verr == nil:
		t.log.Info("acceptance soak passed", "run", rec.Run, "rate", v.Rate, "p99", v.P99)
		return true, "", nil
	case v != nil:
		why = fmt.Sprintf("acceptance soak %s (verification %d): %s", v.Verdict, v.Seq, strings.Join(v.Failures, "; "))
		if len(v.Causes) > 0 {
			why += "; likely cause: " + v.Causes[0].Name + ": " + v.Causes[0].Detail
		}
	default:
		why = "acceptance soak not run: " + verr.Error()
	}
	why += "; the incumbent is kept"
	t.log.Warn("recommendation not accepted", "run", rec.Run, "why", why)
	rec.Accepted = false
	rec.Note = strings.TrimPrefix(rec.Note+"; not accepted: "+why, "; ")
	if d := rep.Decision; d != nil {
		d.Accepted, d.Kept, d.Message = false, true, why
	}
	return false, why, nil
}
