package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/tuner"
)

// plan answers GET /api/v1/studies/{study}/plan?target_qps=N[&headroom=H][&run=R]
// with the fleet plan `batchtune plan --json` prints: the servers N req/s
// needs with the recommended configuration, the baseline and TF's
// defaults (default recommendation: the incumbent, else the latest).
func (a *api) plan(w http.ResponseWriter, r *http.Request) {
	name, ok := a.storeStudy(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	num := func(key string, def float64) (float64, error) {
		v := q.Get(key)
		if v == "" {
			return def, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: not a number: %q", key, v)
		}
		return f, nil
	}
	target, err := num("target_qps", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	headroom, err := num("headroom", capacity.DefaultHeadroom)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	var run uint64
	if v := q.Get("run"); v != "" {
		if run, err = strconv.ParseUint(v, 10, 64); err != nil || run == 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("run: want a run number >= 1, got %q", v))
			return
		}
	}
	if err := tuner.CheckPlanInputs(target, headroom, "target_qps", "headroom"); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	rec, err := tuner.PlanRecommendation(r.Context(), a.d.db, name, run)
	if errors.Is(err, tuner.ErrNoRecommendation) {
		writeError(w, http.StatusNotFound, err)
		return
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	p, err := tuner.MakePlan(rec, target, headroom)
	if errors.Is(err, tuner.ErrNoCapacity) {
		writeError(w, http.StatusConflict, err)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}
