package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	goruntime "runtime"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/verify"
)

// withVerify returns ro with the study's acceptance soak (schedule.verify)
// as its Verifier: after an accepted change and before the rollout
// command, the new recommendation is held at the soak's rate on the run's
// own runtime; when it fails, the tuner keeps the incumbent, records the
// recommendation as not accepted and says why in the run's detail and the
// decision, which status and the API show. The soak's record is in the
// store beside the run.
func withVerify(ro tuner.RunOptions, s *configs.Study, log *slog.Logger) tuner.RunOptions {
	if ro.Verify == nil {
		ro.Verify = verifier(s, log)
	}
	return ro
}

// verifier is schedule.verify's soak for study s; nil when it is off.
func verifier(s *configs.Study, log *slog.Logger) tuner.Verifier {
	sv := s.Schedule.Verify
	if !sv.Enabled {
		return nil
	}
	return func(ctx context.Context, rt runtime.Runtime, rec *store.Recommendation) (*store.Verification, error) {
		rate, src := sv.Rate, "schedule.verify.rate"
		if rate == 0 {
			var err error
			if rate, src, err = verify.RateOf(rec, sv.Headroom); err != nil {
				return nil, fmt.Errorf("schedule.verify: %w; set schedule.verify.rate", err)
			}
		}
		log.Info("acceptance soak starting", "study", s.Name, "run", rec.Run, "rate", rate, "duration", sv.Duration.D())
		return verify.Run(ctx, s, rt, verify.Subject{
			Run: rec.Run, Recommendation: rec.Seq, Source: fmt.Sprintf("the recommendation of run %d", rec.Run),
			Batching: []byte(rec.Batching), Flags: rec.Flags,
		}, verify.Options{
			Rate: rate, RateSource: src, Duration: sv.Duration.D(), Interval: sv.Interval.D(),
			MaxErrorRate: sv.MaxErrorRate, Cores: goruntime.NumCPU(), Logger: log,
		})
	}
}

// verifications answers GET /api/v1/studies/{study}/verifications: the
// study's acceptance soaks, oldest first, each with its verdict, failures,
// likely causes and per-interval series.
func (a *api) verifications(w http.ResponseWriter, r *http.Request) {
	name, ok := a.storeStudy(w, r)
	if !ok {
		return
	}
	vs, err := a.d.db.Verifications(r.Context(), name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, statusOf(err), err)
		return
	}
	if vs == nil {
		vs = []store.Verification{}
	}
	writeJSON(w, http.StatusOK, vs)
}
