package daemon_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/report/browsertest"
	"github.com/batchtune/batchtune/report/reporttest"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// reportRig serves a daemon whose store holds the report fixture, with a
// token configured (reads need none).
func reportRig(t *testing.T) (*httptest.Server, reporttest.Expect) {
	t.Helper()
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	want, err := reporttest.Populate(context.Background(), r.db, at(t, "2025-12-31T10:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.d.Handler(daemon.APIOptions{Token: testToken}))
	t.Cleanup(srv.Close)
	return srv, want
}

func get(t *testing.T, method, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet {
		// As the API's own clients send it, so the request reaches the
		// handler past the cross-site guard (guard.go).
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestReportPages(t *testing.T) {
	srv, _ := reportRig(t)
	for _, tc := range []struct {
		name, method, path string
		code               int
		want               string
	}{
		// the index links each study to its latest report
		{"index", "GET", "/reports", 200, `<a href="/reports/fixture">fixture</a>`},
		{"index, slash", "GET", "/reports/", 200, `<a href="/reports/fixture">fixture</a>`},
		// the latest run's report, with no token: reads are open
		{"latest", "GET", "/reports/fixture", 200, `<figure id="fig-trials"`},
		{"one run", "GET", "/reports/fixture/runs/1", 200, "Study fixture — run 1"},
		{"unknown run", "GET", "/reports/fixture/runs/9", 404, "run 9"},
		{"bad run", "GET", "/reports/fixture/runs/x", 400, "x"},
		{"unknown study", "GET", "/reports/nope", 404, "nope"},
		// read-only: nothing else is allowed
		{"post", "POST", "/reports/fixture", 405, "method not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, h, body := get(t, tc.method, srv.URL+tc.path)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s = %d, want %d with %q:\n%.400s", tc.method, tc.path, code, tc.code, tc.want, body)
			}
			if code != 405 {
				if ct := h.Get("Content-Type"); ct != "text/html; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
				if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
					t.Errorf("no restrictive Content-Security-Policy: %q", h.Get("Content-Security-Policy"))
				}
			}
		})
	}
}

// TestReportPagesInBrowser opens the daemon's index and a study's report
// in Chromium, under the daemon's Content-Security-Policy: no console
// errors, the expected markers, a non-blank screenshot.
func TestReportPagesInBrowser(t *testing.T) {
	path := browsertest.Require(t)
	b, err := browsertest.Start(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv, want := reportRig(t)

	index, err := b.Open(srv.URL+"/reports", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(index.Problems) > 0 || !strings.Contains(index.Text, "fixture") {
		t.Errorf("index: problems %v, text %q", index.Problems, index.Text)
	}
	page, err := b.Open(srv.URL+"/reports/fixture", 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Problems) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(page.Problems, "\n"))
	}
	for fig, kinds := range want {
		if diff := cmp.Diff(kinds, page.Markers[fig]); diff != "" {
			t.Errorf("figure %s: markers (-want +got):\n%s", fig, diff)
		}
	}
	if !strings.Contains(page.Text, "← all studies") {
		t.Error("the daemon's report does not link back to the index")
	}
	if err := browsertest.CheckScreenshot(page.Screenshot); err != nil {
		t.Error(err)
	}
}
