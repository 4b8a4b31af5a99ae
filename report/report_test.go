package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/report/reporttest"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

func fixture(t *testing.T) (*report.Report, reporttest.Expect) {
	t.Helper()
	db := storetest.Open(t)
	want, err := reporttest.Populate(context.Background(), db, t0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Build(context.Background(), db, reporttest.Study, 0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return r, want
}

// markerRE finds the markers the figures tag in their SVG.
var markerRE = regexp.MustCompile(`class="pt pt-([a-z]+)"`)

// countMarkers counts tagged markers per figure in an HTML page, reading
// the figures by their id.
func countMarkers(t *testing.T, html string) map[string]map[string]int {
	t.Helper()
	got := map[string]map[string]int{}
	parts := strings.Split(html, `<figure id="fig-`)
	for _, p := range parts[1:] {
		id := p[:strings.Index(p, `"`)]
		body := p[:strings.Index(p, "</figure>")]
		got[id] = map[string]int{}
		for _, m := range markerRE.FindAllStringSubmatch(body, -1) {
			got[id][m[1]]++
		}
	}
	return got
}

func TestBuildDerivesFromStore(t *testing.T) {
	r, _ := fixture(t)
	if r.Verdict == nil || report.CompactConfig(r.Verdict.Config) != "batch=32 timeout_us=2000 threads=2 queue=16 grpc_threads=64" {
		t.Fatalf("verdict = %+v", r.Verdict)
	}
	if r.Winner != 8 {
		t.Errorf("winner = trial %d, want 8 (the best search trial of the recommended configuration)", r.Winner)
	}
	// Pareto front by latency: 2 (20ms,120), 1 (30ms,240), 11/14 baseline
	// (35ms,150) are beaten by 1; 3 (45ms, 310), 13 (46ms, 305) beaten by
	// 3; 12 (59ms, 415), 8 (60ms, 420); 9 and 4 (140ms, 380) beaten by 8.
	if diff := cmp.Diff([]uint64{2, 1, 3, 12, 8}, r.Pareto); diff != "" {
		t.Errorf("pareto (-want +got):\n%s", diff)
	}
	if r.ConfirmFrom != 9 {
		t.Errorf("confirmation begins at trial %d, want 9", r.ConfirmFrom)
	}
	last := r.Convergence[len(r.Convergence)-1]
	if last.Best == nil || *last.Best != 420 {
		t.Errorf("best feasible after the last trial = %v, want 420", last.Best)
	}
	if len(r.Candidates) != 3 {
		t.Fatalf("candidates = %d, want 3 (two configurations and the baseline)", len(r.Candidates))
	}
	c := r.Candidates[0]
	// 405 and 415: the geometric mean sqrt(405·415), as the tuner ranks.
	if !c.Winner || math.Abs(c.Mean-409.9695) > 1e-3 || !c.Bounded || !(c.Low < 405 && c.High > 415) || c.Feasible != 2 || c.Repeats != 2 {
		t.Errorf("winner candidate = %+v, want the geometric mean 409.97 with an interval around it, 2/2 feasible", c)
	}
	if len(r.RateCurves) != 2 || len(r.RateCurves[0].Steps) != 3 || r.RateCurves[0].Steps[2].Latency != 90*time.Millisecond {
		t.Errorf("rate curves = %+v", r.RateCurves)
	}
	if r.History == nil || len(r.History.Recommendations) != 2 || len(r.History.Remeasured) != 1 {
		t.Errorf("history = %+v", r.History)
	}
	if r.Machine.GeneratorCores != 2 || r.Machine.Transport != "grpc" {
		t.Errorf("machine = %+v", r.Machine)
	}
	if r.Timing.Measured != 13 || r.Timing.MeanSetup != 1400*time.Millisecond {
		t.Errorf("timing = %+v, want 13 measured with 1.4s setup each", r.Timing)
	}
	if r.Study.Quantile != "P99" || r.Study.SLOLatency != 100*time.Millisecond || !r.Study.Maximize {
		t.Errorf("facts = %+v", r.Study)
	}
}

func TestBuildErrors(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	if _, err := report.Build(ctx, db, "nope", 0, t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown study: err = %v, want store.ErrNotFound", err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "empty", Spec: "name: empty\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Build(ctx, db, "empty", 0, t0); !errors.Is(err, report.ErrNoRuns) {
		t.Errorf("study without runs: err = %v, want ErrNoRuns", err)
	}
	if _, err := reporttest.Populate(ctx, db, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Build(ctx, db, reporttest.Study, 9, t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: err = %v, want store.ErrNotFound", err)
	}
}

func TestHTMLMarkersMatchTheStore(t *testing.T) {
	r, want := fixture(t)
	var b bytes.Buffer
	if err := report.WriteHTML(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	got := countMarkers(t, html)
	for fig, kinds := range want {
		if diff := cmp.Diff(kinds, got[fig]); diff != "" {
			t.Errorf("figure %s markers (-want +got):\n%s", fig, diff)
		}
	}
	// one panel per tuned parameter
	for _, p := range []string{"max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches", "grpc_max_threads"} {
		if _, ok := got["param-"+p]; !ok {
			t.Errorf("no panel for parameter %s", p)
		}
	}
	// Self-contained: nothing is fetched when the page opens.
	// (SVG's xmlns names are not fetched.)
	for _, bad := range []string{"<script", `src="http`, `href="http`, "url(http", "@import", `<link rel="stylesheet"`} {
		if strings.Contains(html, bad) {
			t.Errorf("the page contains %q; it must open with no network", bad)
		}
	}
	for _, must := range []string{"max_batch_size { value: 32 }", "--enable_batching=true", "+177.0% (90% interval +160.0% to +195.0%)", "server exited: out of memory", "— (stopped early, before a rate was measured)"} {
		if !strings.Contains(html, template(must)) {
			t.Errorf("the page lacks %q", must)
		}
	}
}

// template escapes s as html/template writes text.
func template(s string) string {
	return strings.NewReplacer("+", "&#43;").Replace(s)
}

func TestJSONCarriesTheSameContent(t *testing.T) {
	r, want := fixture(t)
	var b bytes.Buffer
	if err := report.WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		report.Report
		Figures []report.Figure `json:"figures"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Trials) != 14 || back.Verdict == nil || back.Verdict.Objective != 410 || back.Winner != 8 {
		t.Errorf("decoded report: %d trials, verdict %+v, winner %d", len(back.Trials), back.Verdict, back.Winner)
	}
	for _, f := range back.Figures {
		if w, ok := want[f.ID]; ok {
			if diff := cmp.Diff(w, f.Counts); diff != "" {
				t.Errorf("figure %s counts (-want +got):\n%s", f.ID, diff)
			}
		}
	}
}

func TestTextReport(t *testing.T) {
	r, _ := fixture(t)
	var b bytes.Buffer
	if err := report.WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, must := range []string{"study fixture, run 1 (scheduled, finished)", "recommended: batch=32", "confirm ← winner", "[351.1 req/s, 478.7 req/s]", "—"} {
		if !strings.Contains(out, must) {
			t.Errorf("text report lacks %q:\n%s", must, out)
		}
	}
	if strings.Contains(out, " 0.0 ") {
		t.Errorf("a trial row reads 0.0 req/s:\n%s", out)
	}
}
