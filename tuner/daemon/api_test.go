package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/daemon"
)

const testToken = "s3cr3t-t0ken-0123456789"

// apiRig is a rig with its API served.
type apiRig struct {
	*rig
	srv *httptest.Server
}

func newAPIRig(t *testing.T, o daemon.APIOptions) *apiRig {
	t.Helper()
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "0 3 * * *", "Europe/Berlin", filepath.Join(r.out, "s.config")))
	r.write("broken.yaml", "name: broken\nslo: {latency: soon}\n")
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := &apiRig{rig: r, srv: httptest.NewServer(r.d.Handler(o))}
	t.Cleanup(a.srv.Close)
	return a
}

// call does one request and returns the status and body.
func (a *apiRig) call(method, path, contentType, body string, header ...string) (int, string) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); path != daemon.PathMetrics && ct != "application/json" {
		a.t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return resp.StatusCode, string(data)
}

// apiCase is one request and what must come back.
type apiCase struct {
	name         string
	method, path string
	ctype, body  string
	code         int
	want         string // a piece of the body
}

func (a *apiRig) check(t *testing.T, cases []apiCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := a.call(tc.method, tc.path, tc.ctype, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s: got %d %s\nwant %d and %q", tc.method, tc.path, code, body, tc.code, tc.want)
			}
		})
	}
}

func TestAPIBeforeAndAfterRuns(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{})
	api := daemon.PathAPI
	// Before Run: alive, not ready.
	a.check(t, []apiCase{
		{"healthz", "GET", "/healthz", "", "", 200, `"status": "ok"`},
		{"readyz before Run", "GET", "/readyz", "", "", 503, `"starting"`},
	})
	a.start()
	a.check(t, []apiCase{
		{"readyz", "GET", "/readyz", "", "", 200, `"ready": true`},
		// Studies: the loaded one with its schedule, the broken file with its line.
		{"studies", "GET", api + "/studies", "", "", 200, `"next": "2026-01-01T03:00:00+01:00"`},
		{"studies list problems", "GET", api + "/studies", "", "", 200, `broken.yaml:2: slo.latency`},
		{"study", "GET", api + "/studies/s", "", "", 200, `"state": "idle"`},
		{"unknown study", "GET", api + "/studies/nope", "", "", 404, `unknown study: nope`},
		// Nothing has run yet.
		{"runs, none yet", "GET", api + "/studies/s/runs", "", "", 200, `[]`},
		{"runs of unknown study", "GET", api + "/studies/nope/runs", "", "", 404, `unknown study`},
		{"runs, bad limit", "GET", api + "/studies/s/runs?limit=0", "", "", 400, `limit: must be a whole number from 1 to 1000`},
		{"runs, limit not a number", "GET", api + "/studies/s/runs?limit=ten", "", "", 400, `limit:`},
		{"runs, limit too big", "GET", api + "/studies/s/runs?limit=1001", "", "", 400, `limit:`},
		{"run, missing", "GET", api + "/studies/s/runs/1", "", "", 404, `not found`},
		{"run, not a number", "GET", api + "/studies/s/runs/first", "", "", 400, `run: must be a run number`},
		{"run, zero", "GET", api + "/studies/s/runs/0", "", "", 400, `run: must be a run number`},
		{"recommendation, none yet", "GET", api + "/studies/s/recommendation", "", "", 404, `study s has no accepted recommendation yet`},
		{"recommendations, none yet", "GET", api + "/studies/s/recommendations", "", "", 200, `[]`},
		{"recommendations of unknown study", "GET", api + "/studies/nope/recommendations", "", "", 404, `unknown study`},
		// Wrong method, wrong path.
		{"method not allowed", "PUT", api + "/studies/s", "application/json", "", 405, `allowed: GET`},
		{"method not allowed on a mutating path", "GET", api + "/reload", "", "", 405, `allowed: POST`},
		{"no such endpoint", "GET", api + "/nothing", "", "", 404, `no such endpoint`},
	})

	// Bad triggers change nothing.
	a.check(t, []apiCase{
		{"trigger, unknown field", "POST", api + "/studies/s/runs", "application/json", `{"budjet": 3}`, 400, `unknown field \"budjet\"`},
		{"trigger, wrong type", "POST", api + "/studies/s/runs", "application/json", `{"budget": "many"}`, 400, `budget: must be a int, got a JSON string`},
		{"trigger, negative budget", "POST", api + "/studies/s/runs", "application/json", `{"budget": -1}`, 400, `budget: must be from 1 to 10000`},
		{"trigger, huge budget", "POST", api + "/studies/s/runs", "application/json", `{"budget": 100000}`, 400, `budget:`},
		{"trigger, not JSON", "POST", api + "/studies/s/runs", "application/json", `budget=3`, 400, `request body:`},
		{"trigger, two values", "POST", api + "/studies/s/runs", "application/json", `{} {}`, 400, `more than one JSON value`},
		{"trigger, an array", "POST", api + "/studies/s/runs", "application/json", `[1]`, 400, `request body:`},
		{"trigger, form content type", "POST", api + "/studies/s/runs", "application/x-www-form-urlencoded", `{"budget": 3}`, 415, `Content-Type: application/json`},
		{"trigger, too big", "POST", api + "/studies/s/runs", "application/json", `{"budget": 3` + strings.Repeat(" ", 5000) + `}`, 413, `over 4096 bytes`},
		{"trigger, unknown study", "POST", api + "/studies/nope/runs", "application/json", "", 404, `unknown study`},
		{"cancel, nothing", "POST", api + "/studies/s/runs/current/cancel", "application/json", "", 409, `nothing to cancel`},
		{"cancel, bad id", "POST", api + "/studies/s/runs/latest/cancel", "application/json", "", 400, `run: must be a run number (1, 2, ...) or \"current\"`},
		{"cancel, missing run", "DELETE", api + "/studies/s/runs/42", "application/json", "", 404, `run not found`},
		{"cancel, unknown study", "DELETE", api + "/studies/nope/runs/current", "application/json", "", 404, `unknown study`},
		{"cancel, body with fields", "POST", api + "/studies/s/runs/current/cancel", "application/json", `{"force": true}`, 400, `unknown field`},
		{"reload, body with fields", "POST", api + "/reload", "application/json", `{"dir": "/etc"}`, 400, `unknown field`},
	})
	a.runner.none(t, "no bad request may start a run")

	// A good trigger: queued (202), then running.
	code, body := a.call("POST", api+"/studies/s/runs", "application/json", `{"budget": 3, "warm_start": false}`)
	var q daemon.QueuedRun
	if err := json.Unmarshal([]byte(body), &q); code != 202 || err != nil || q.Study != "s" || q.Budget != 3 || q.WarmStart || q.Reason != daemon.ReasonAPI {
		t.Fatalf("trigger: %d %s", code, body)
	}
	run := a.runner.next(t)
	if run.Opts.Budget != 3 || run.Opts.WarmStart {
		t.Errorf("triggered run options %+v, want budget 3, cold", run.Opts)
	}
	a.waitFor("the study running", func() bool { return a.state("s") == daemon.StateRunning })
	code, body = a.call("GET", api+"/studies/s", "", "")
	var st daemon.StudyStatus
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Current == nil || st.Current.Run != run.run.ID || st.Current.TrialState != store.TrialMeasuring {
		t.Errorf("running study: %d %s", code, body)
	}
	// Queue one behind it (an empty body is fine), then a second is refused.
	a.check(t, []apiCase{
		{"trigger behind the running run", "POST", api + "/studies/s/runs", "application/json", "", 202, `"position": 1`},
		{"trigger while queued", "POST", api + "/studies/s/runs", "application/json", "", 409, `already queued`},
	})
	// Cancel the queued one by asking for... the running one is "current":
	// cancel that by its number, then the queued one starts.
	runPath := api + "/studies/s/runs/" + itoa(run.run.ID)
	a.check(t, []apiCase{
		{"cancel the running run", "DELETE", runPath, "application/json", "", 202, `"what": "running"`},
	})
	next := a.runner.next(t)
	next.finishWith(ending{outcome: store.OutcomeRecommended, objective: 321.5, accepted: true,
		rejected: "search: configuration rejected: slo_timeout: batch_timeout_micros: 90000 µs is not below SLO/3",
		decision: &tuner.Decision{Accepted: true, Message: "first recommendation"}})
	a.waitFor("the run's end", func() bool {
		return a.state("s") == daemon.StateIdle && a.status("s").LastOutcome != daemon.OutcomeCancelled
	})

	a.check(t, []apiCase{
		{"runs", "GET", api + "/studies/s/runs", "", "", 200, `"outcome": "recommended"`},
		{"runs, last one", "GET", api + "/studies/s/runs?limit=1", "", "", 200, `"id": ` + itoa(next.run.ID)},
		{"cancelled run is closed", "GET", runPath, "", "", 200, `cancelled through the API`},
		{"run with trials", "GET", api + "/studies/s/runs/" + itoa(next.run.ID), "", "", 200, `"state": "rejected"`},
		{"recommendation", "GET", api + "/studies/s/recommendation", "", "", 200, `"objective": 321.5`},
		{"recommendations", "GET", api + "/studies/s/recommendations", "", "", 200, `"accepted": true`},
		{"cancel a finished run", "POST", api + "/studies/s/runs/" + itoa(next.run.ID) + "/cancel", "application/json", "", 409, `is finished`},
		{"reload", "POST", api + "/reload", "application/json", "", 200, `"problems"`},
	})
	// Stored as cancelled, not as failed/error (issue 15).
	if cancelled, err := a.db.Run(context.Background(), "s", run.run.ID); err != nil || cancelled.State != store.RunCancelled || cancelled.Outcome != store.OutcomeCancelled {
		t.Errorf("the cancelled run is stored as %+v (%v), want cancelled/cancelled", cancelled, err)
	}
	code, body = a.call("GET", api+"/studies/s/runs?limit=1", "", "")
	var runs []store.Run
	if err := json.Unmarshal([]byte(body), &runs); code != 200 || err != nil || len(runs) != 1 || runs[0].ID != next.run.ID {
		t.Errorf("runs?limit=1: %d %s", code, body)
	}

	// The metrics, as values.
	fams := a.metrics(t)
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		// The cancelled run's trial was interrupted; the second run's
		// succeeded, and one configuration was rejected by the SLO rule.
		{"batchtune_trials_total", map[string]string{"study": "s", "state": "interrupted"}, 1},
		{"batchtune_trials_total", map[string]string{"study": "s", "state": "succeeded"}, 1},
		{"batchtune_trials_total", map[string]string{"study": "s", "state": "rejected"}, 1},
		{"batchtune_rejected_configurations_total", map[string]string{"study": "s", "rule": "slo_timeout"}, 1},
		{"batchtune_runs_total", map[string]string{"study": "s", "outcome": "cancelled"}, 1},
		{"batchtune_runs_total", map[string]string{"study": "s", "outcome": "recommended"}, 1},
		{"batchtune_best_objective", map[string]string{"study": "s"}, 321.5},
		{"batchtune_incumbent_objective", map[string]string{"study": "s"}, 321.5},
		{"batchtune_incumbent_degraded", map[string]string{"study": "s"}, 0},
		{"batchtune_study_running", map[string]string{"study": "s"}, 0},
		{"batchtune_queued_runs", nil, 0},
		{"batchtune_study_load_problems", nil, 1},
		// 03:00 in Berlin on 2026-01-01 is 02:00 UTC.
		{"batchtune_study_next_run_timestamp_seconds", map[string]string{"study": "s"}, float64(at(t, "2026-01-01T02:00:00Z").Unix())},
	}
	for _, w := range want {
		got, ok := metricValue(fams, w.name, w.labels)
		if !ok || got != w.value {
			t.Errorf("%s%v = %v (found %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
	// Trial durations: the trial that ran to its end; neither the
	// interrupted one (cut short) nor the rejected one (never ran).
	if h, ok := histogram(fams, "batchtune_trial_duration_seconds", map[string]string{"study": "s"}); !ok || h.GetSampleCount() != 1 {
		t.Errorf("trial duration histogram: %v (found %v), want 1 sample", h, ok)
	}
	// The last success is the run's end, from the store.
	stored, err := a.db.Run(context.Background(), "s", next.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := metricValue(fams, "batchtune_last_success_timestamp_seconds", map[string]string{"study": "s"}); math.Abs(got-float64(stored.Ended.UnixNano())/1e9) > 1e-3 {
		t.Errorf("last success %v, want the run's end %v", got, stored.Ended)
	}

	// After the stop: not ready, no new runs.
	a.stop(false)
	a.check(t, []apiCase{
		{"readyz after stop", "GET", "/readyz", "", "", 503, `"stopped"`},
		{"trigger after stop", "POST", api + "/studies/s/runs", "application/json", "", 503, `shutting down`},
	})
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestAPIToken: with a token, every mutating endpoint wants it; reads
// never do.
func TestAPIToken(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{Token: testToken})
	a.start()
	api := daemon.PathAPI
	mutating := []struct{ method, path string }{
		{"POST", api + "/studies/s/runs"},
		{"POST", api + "/studies/s/runs/current/cancel"},
		{"DELETE", api + "/studies/s/runs/current"},
		{"POST", api + "/reload"},
	}
	for _, m := range mutating {
		for _, hdr := range [][]string{
			nil, // none
			{"Authorization", "Bearer wrong-token-0123456789"},
			{"Authorization", "Basic " + testToken},
			{"Authorization", "Bearer " + testToken + "x"},
		} {
			code, body := a.call(m.method, m.path, "application/json", "", hdr...)
			if code != http.StatusUnauthorized || !strings.Contains(body, "bearer token") {
				t.Errorf("%s %s with %q: %d %s, want 401", m.method, m.path, hdr, code, body)
			}
		}
	}
	a.runner.none(t, "unauthorised triggers")
	// Reads need no token.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", api + "/studies", api + "/studies/s/runs"} {
		if code, _ := a.call("GET", p, "", ""); code != 200 {
			t.Errorf("GET %s without a token: %d, want 200", p, code)
		}
	}
	// With it, the same requests go through.
	auth := []string{"Authorization", "Bearer " + testToken}
	if code, body := a.call("POST", api+"/studies/s/runs", "", "", append(auth, daemon.HeaderRequestedBy, "1")...); code != 202 {
		t.Errorf("trigger with the token: %d %s", code, body)
	}
	a.runner.next(t)
	if code, body := a.call("POST", api+"/studies/s/runs/current/cancel", "application/json", "", auth...); code != 202 {
		t.Errorf("cancel with the token: %d %s", code, body)
	}
	if code, body := a.call("POST", api+"/reload", "application/json", "", auth...); code != 200 {
		t.Errorf("reload with the token: %d %s", code, body)
	}
}

// TestClient: the client batchtune status uses, against the API.
func TestClient(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{Token: testToken})
	a.start()
	ctx := context.Background()
	cl := daemon.NewClient(a.srv.URL, nil, testToken)
	all, err := cl.Studies(ctx)
	if err != nil || len(all.Studies) != 1 || len(all.Problems) != 1 {
		t.Fatalf("studies: %+v, %v", all, err)
	}
	if _, err := cl.Study(ctx, "nope"); err == nil || err.(*daemon.APIError).Status != 404 {
		t.Errorf("unknown study: %v, want a 404 APIError", err)
	}
	q, err := cl.Trigger(ctx, "s", daemon.TriggerOptions{Budget: 2})
	if err != nil || q.Budget != 2 {
		t.Fatalf("trigger: %+v, %v", q, err)
	}
	a.runner.next(t)
	res, err := cl.Cancel(ctx, "s", "current")
	if err != nil || res.What != daemon.StateRunning {
		t.Errorf("cancel: %+v, %v", res, err)
	}
	noToken := daemon.NewClient(a.srv.URL, &http.Client{Timeout: 5 * time.Second}, "")
	if _, err := noToken.Trigger(ctx, "s", daemon.TriggerOptions{}); err == nil || err.(*daemon.APIError).Status != 401 {
		t.Errorf("trigger without the token: %v, want a 401", err)
	}
}

// metrics scrapes the rig's /metrics.
func (a *apiRig) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return scrape(t, a.srv.URL)
}

// scrape reads base's /metrics and parses it.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + daemon.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// find returns the metric of family name whose labels include labels.
func find(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
	for _, m := range f.GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(labels) {
			return m, true
		}
	}
	return nil, false
}

// metricValue is the value of a counter or gauge.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	m, ok := find(fams, name, labels)
	if !ok {
		return 0, false
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

func histogram(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (*dto.Histogram, bool) {
	m, ok := find(fams, name, labels)
	if !ok || m.Histogram == nil {
		return nil, false
	}
	return m.GetHistogram(), true
}
