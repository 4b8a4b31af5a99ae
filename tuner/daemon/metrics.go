package daemon

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/store"
)

// Run outcomes as the runs metric counts them: the store's outcomes of a
// finished run, and what stopped an unfinished one.
const (
	OutcomeInterrupted = "interrupted" // stopped by a shutdown; resumed later
	OutcomeCancelled   = "cancelled"   // cancelled through the API; not resumed
)

// Rollout results as the rollouts metric counts them.
const (
	RolloutOK      = "ok"
	RolloutFailed  = "failed"
	RolloutTimeout = "timeout"
)

// rejectionRules are the rule label's values: search's rule names and
// "other" for a reason that names none, so the label set stays bounded.
var rejectionRules = []string{search.RuleSLOTimeout, search.RuleTFValidity, search.RuleUserBound, search.RuleMalformed}

// metrics are the daemon's Prometheus metrics, in a registry of their own
// (never the global one). Every label set is bounded: study is one of the
// loaded studies (series of a study dropped by a reload are deleted),
// state, outcome, rule and result are enumerations.
type metrics struct {
	reg *prometheus.Registry

	trials        *prometheus.CounterVec
	trialDuration *prometheus.HistogramVec
	bestObjective *prometheus.GaugeVec
	incumbentObj  *prometheus.GaugeVec
	lastSuccess   *prometheus.GaugeVec
	runs          *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	degraded      *prometheus.GaugeVec
	degradation   *prometheus.GaugeVec
	rollouts      *prometheus.CounterVec
	running       *prometheus.GaugeVec
	nextRun       *prometheus.GaugeVec
	queued        prometheus.Gauge
	loadProblems  prometheus.Gauge
}

func newMetrics() *metrics {
	const ns = "batchtune"
	m := &metrics{reg: prometheus.NewRegistry()}
	m.trials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Name: "trials_total",
		Help: "Trials that reached a final state, by study and state (succeeded, failed, early-stopped, invalid, rejected, interrupted).",
	}, []string{"study", "state"})
	m.trialDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Name: "trial_duration_seconds",
		Help:    "Wall time of trials that ran to their end (restart, readiness, warmup, measurement), by study; interrupted and rejected trials are not observed.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"study"})
	m.bestObjective = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "best_objective",
		Help: "Best feasible objective of the study's latest run (requests/s for max_throughput, seconds of the SLO quantile for min_latency).",
	}, []string{"study"})
	m.incumbentObj = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "incumbent_objective",
		Help: "Objective of the study's incumbent (its latest accepted recommendation) as confirmed when it was accepted.",
	}, []string{"study"})
	m.lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "last_success_timestamp_seconds",
		Help: "When the study's latest run that recommended or kept a configuration ended, in Unix seconds.",
	}, []string{"study"})
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Name: "runs_total",
		Help: "Runs that ended, by study and outcome (recommended, kept, no_feasible, error, interrupted, cancelled).",
	}, []string{"study", "outcome"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Name: "rejected_configurations_total",
		Help: "Configurations refused by a hard rule before they ran, by study and rule (slo_timeout, tf_validity, user_bound, malformed, other).",
	}, []string{"study", "rule"})
	m.degraded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "incumbent_degraded",
		Help: "1 when the study's latest warm-started run found the incumbent degraded past schedule.degradation_threshold, else 0.",
	}, []string{"study"})
	m.degradation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "incumbent_degradation_ratio",
		Help: "The incumbent's relative loss of objective since it was accepted, as the latest warm-started run measured it (positive is worse).",
	}, []string{"study"})
	m.rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Name: "rollouts_total",
		Help: "Rollout commands run after accepted changes, by study and result (ok, failed, timeout).",
	}, []string{"study", "result"})
	m.running = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "study_running",
		Help: "1 while a run of the study is in progress, else 0.",
	}, []string{"study"})
	m.nextRun = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "study_next_run_timestamp_seconds",
		Help: "When the study is next due by its schedule, in Unix seconds; absent for on-demand studies.",
	}, []string{"study"})
	m.queued = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Name: "queued_runs",
		Help: "Runs waiting for their target to be free.",
	})
	m.loadProblems = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Name: "study_load_problems",
		Help: "Study files the latest load or reload could not use.",
	})
	m.reg.MustRegister(m.trials, m.trialDuration, m.bestObjective, m.incumbentObj, m.lastSuccess,
		m.runs, m.rejected, m.degraded, m.degradation, m.rollouts, m.running, m.nextRun, m.queued, m.loadProblems,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in Prometheus' exposition formats.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// addStudy creates the study's series that have a meaning before its first
// run, so that a dashboard sees zeros rather than nothing.
func (m *metrics) addStudy(name string) {
	m.degraded.WithLabelValues(name)
	m.running.WithLabelValues(name)
}

// dropStudy deletes every series of a study no longer loaded.
func (m *metrics) dropStudy(name string) {
	l := prometheus.Labels{"study": name}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.trials, m.trialDuration, m.bestObjective, m.incumbentObj, m.lastSuccess, m.runs,
		m.rejected, m.degraded, m.degradation, m.rollouts, m.running, m.nextRun,
	} {
		v.DeletePartialMatch(l)
	}
}

// trial counts a trial that reached a final state.
func (m *metrics) trial(study string, tr *store.Trial) {
	m.trials.WithLabelValues(study, string(tr.State)).Inc()
	if tr.State == store.TrialRejected {
		for _, rule := range RejectedRules(tr.Reason) {
			m.rejected.WithLabelValues(study, rule).Inc()
		}
		return
	}
	if tr.State != store.TrialInterrupted && len(tr.Phases) >= 2 {
		d := tr.Phases[len(tr.Phases)-1].At.Sub(tr.Phases[0].At)
		m.trialDuration.WithLabelValues(study).Observe(d.Seconds())
	}
}

func (m *metrics) setNextRun(study string, next time.Time) {
	if next.IsZero() {
		m.nextRun.DeleteLabelValues(study)
		return
	}
	m.nextRun.WithLabelValues(study).Set(float64(next.UnixNano()) / 1e9)
}

// RejectedRules returns the hard rules a rejected trial's reason names, as
// search renders violations ("search: configuration rejected: slo_timeout:
// batch_timeout_micros: ...; tf_validity: ..."): each rule once, in order,
// and "other" when the reason names none of search's rules.
func RejectedRules(reason string) []string {
	rest := strings.TrimPrefix(reason, search.ErrRejected.Error()+": ")
	var out []string
	for _, part := range strings.Split(rest, "; ") {
		name, _, ok := strings.Cut(part, ": ")
		if !ok {
			continue
		}
		for _, r := range rejectionRules {
			if name == r && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		out = []string{"other"}
	}
	return out
}
