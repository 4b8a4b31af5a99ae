// Package reporttest writes a known study into a store, for the tests of
// the report views (the report package, the CLI and the daemon): every
// kind of trial, a confirmation stage, load steps, a recommendation and a
// re-tune history, with the number of markers each plot must draw.
package reporttest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
)

// Study is the fixture study's name.
const Study = "fixture"

// Expect is what the fixture's report must show: figure ID → marker kind
// → count.
type Expect map[string]map[string]int

// Populate writes the fixture study into db: one scheduled run of 14
// trials (an incumbent re-measurement, 7 search trials of every state,
// 4 confirmation repeats of 2 candidates, 2 baseline repeats), a
// recommendation from it, and an earlier accepted one. t0 is the run's
// start.
func Populate(ctx context.Context, db *store.DB, t0 time.Time) (Expect, error) {
	t0 = t0.UTC().Truncate(time.Second)
	if err := db.PutStudy(ctx, &store.Study{Name: Study, SpecHash: "fixture", Spec: string(configs.DemoStudy)}); err != nil {
		return nil, err
	}
	early := &store.Recommendation{Study: Study, Run: 0, Time: t0.Add(-24 * time.Hour), Config: cfg(8, 1000, 1, 16, 8),
		Batching: "max_batch_size { value: 8 }\n", Objective: 250, Baseline: "tf-defaults", Accepted: true}
	if err := db.AddRecommendation(ctx, early); err != nil {
		return nil, err
	}
	run := &store.Run{Study: Study, Kind: store.KindScheduled, SpecHash: "fixture", Started: t0}
	if err := db.CreateRun(ctx, run); err != nil {
		return nil, err
	}
	type row struct {
		role     string
		config   []store.Param
		state    store.TrialState
		qps      float64
		p99      time.Duration
		batch    float64
		feasible bool
		reason   string
		steps    bool
	}
	rows := []row{
		{store.RoleIncumbent, cfg(8, 1000, 1, 16, 8), store.TrialSucceeded, 240, 30 * time.Millisecond, 6.5, true, "", false},
		{store.RoleSearch, cfg(4, 0, 1, 4, 8), store.TrialSucceeded, 120, 20 * time.Millisecond, 2.1, true, "", false},
		{store.RoleSearch, cfg(16, 2000, 2, 16, 64), store.TrialSucceeded, 310, 45 * time.Millisecond, 9.8, true, "", true},
		{store.RoleSearch, cfg(64, 20000, 1, 64, 8), store.TrialSucceeded, 380, 140 * time.Millisecond, 40, false, "P99 140ms > SLO 100ms", false},
		{store.RoleSearch, cfg(64, 20000, 2, 4, 8), store.TrialRejected, 0, 0, 0, false, "batch_timeout_micros 20000 must be < SLO/3", false},
		{store.RoleSearch, cfg(32, 5000, 2, 64, 64), store.TrialFailed, 0, 0, 0, false, "server exited: out of memory", false},
		{store.RoleSearch, cfg(64, 10000, 2, 16, 64), store.TrialEarlyStopped, 0, 180 * time.Millisecond, 16, false, "P99 180ms > SLO 100ms", false},
		{store.RoleSearch, cfg(32, 2000, 2, 16, 64), store.TrialSucceeded, 420, 60 * time.Millisecond, 14.2, true, "", true},
		{store.RoleConfirm, cfg(32, 2000, 2, 16, 64), store.TrialSucceeded, 405, 62 * time.Millisecond, 14, true, "", false},
		{store.RoleConfirm, cfg(16, 2000, 2, 16, 64), store.TrialSucceeded, 300, 47 * time.Millisecond, 9.5, true, "", false},
		{store.RoleBaseline, cfg(0, 0, 0, 0, 0), store.TrialSucceeded, 150, 35 * time.Millisecond, 1, true, "", false},
		{store.RoleConfirm, cfg(32, 2000, 2, 16, 64), store.TrialSucceeded, 415, 59 * time.Millisecond, 14.4, true, "", false},
		{store.RoleConfirm, cfg(16, 2000, 2, 16, 64), store.TrialSucceeded, 305, 46 * time.Millisecond, 9.6, true, "", false},
		{store.RoleBaseline, cfg(0, 0, 0, 0, 0), store.TrialSucceeded, 145, 36 * time.Millisecond, 1, true, "", false},
	}
	at := t0
	for _, r := range rows {
		tr := &store.Trial{Study: Study, Run: run.ID, Role: r.role, Config: r.config, State: store.TrialSuggested, Reason: r.reason, Feasible: r.feasible}
		tr.Phases = []store.Phase{{State: store.TrialSuggested, At: at}}
		if r.state != store.TrialRejected {
			tr.Phases = append(tr.Phases,
				store.Phase{State: store.TrialStarting, At: at.Add(100 * time.Millisecond)},
				store.Phase{State: store.TrialWarming, At: at.Add(1100 * time.Millisecond)},
				store.Phase{State: store.TrialMeasuring, At: at.Add(1500 * time.Millisecond)})
		}
		at = at.Add(5 * time.Second)
		tr.Phases = append(tr.Phases, store.Phase{State: r.state, At: at})
		tr.State = r.state
		if r.p99 > 0 {
			obj := r.qps
			tr.Objective = &obj
			tr.Summary = store.Summary{Throughput: r.qps, P50: r.p99 / 3, P90: r.p99 / 2, P95: r.p99 * 3 / 4, P99: r.p99, P999: r.p99 * 2,
				Requests: int64(r.qps*4) + 7, MeanBatch: r.batch, QueueShare: 0.3}
			m := map[string]any{"transport": "grpc", "connections": 2, "generator": map[string]any{"cores": 2}, "qps": r.qps}
			if r.steps {
				m["steps"] = []map[string]any{
					{"offered_rate": 100, "qps": 100, "latency": map[string]any{"p99_ns": int64(10 * time.Millisecond)}},
					{"offered_rate": 200, "qps": 199, "latency": map[string]any{"p99_ns": int64(14 * time.Millisecond)}},
					{"offered_rate": 400, "qps": 310, "latency": map[string]any{"p99_ns": int64(90 * time.Millisecond)}},
				}
			}
			tr.Measurement, _ = json.Marshal(m)
		}
		if err := db.AddTrial(ctx, tr); err != nil {
			return nil, err
		}
	}
	run.State, run.Ended, run.Outcome = store.RunFinished, at, store.OutcomeRecommended
	rec := &store.Recommendation{Study: Study, Run: run.ID, Time: at, Config: cfg(32, 2000, 2, 16, 64),
		Batching: "max_batch_size { value: 32 }\nbatch_timeout_micros { value: 2000 }\n", Flags: []string{"--enable_batching=true", "--batching_parameters_file=batching.config"},
		Objective: 410, Gain: 1.77, GainLow: 1.6, GainHigh: 1.95, Confidence: 0.9, Baseline: "baseline (tf-defaults)", Accepted: true,
		Note: "trial 8: 410.0 req/s (lower bound 378.0); mean batch 14.2 vs 1.0 for the baseline"}
	if err := db.AddRecommendation(ctx, rec); err != nil {
		return nil, err
	}
	run.Recommendation = rec.Seq
	if err := db.PutRun(ctx, run); err != nil {
		return nil, err
	}
	// Counted by hand from the rows above. Measured: the incumbent, 4
	// search trials (2, 3, 8 feasible; 4 infeasible; 7 early-stopped
	// infeasible), 4 confirm and 2 baseline repeats.
	return Expect{
		"trials":      {"feasible": 10, "infeasible": 2, "rejected": 1, "failed": 1, "winner": 1},
		"convergence": {"feasible": 4, "infeasible": 2, "confirm": 6},
		// one panel per parameter: the 12 measured trials less the 2
		// baseline repeats
		"param-max_batch_size": {"feasible": 8, "infeasible": 2},
		"confirmation":         {"sample": 6, "mean": 3},
		"rate":                 {"step": 6},
		"history":              {"accepted": 2, "incumbent": 1},
	}, nil
}

// cfg is a configuration of the demo study's five parameters.
func cfg(batch, timeout, threads, queue, grpc int64) []store.Param {
	return []store.Param{
		{Name: "max_batch_size", Value: batch},
		{Name: "batch_timeout_micros", Value: timeout},
		{Name: "num_batch_threads", Value: threads},
		{Name: "max_enqueued_batches", Value: queue},
		{Name: "grpc_max_threads", Value: grpc},
	}
}
