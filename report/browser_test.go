package report_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/report/browsertest"
)

// browser starts a headless Chromium for the test (see browsertest.Require:
// without one this skips, or fails under BATCHTUNE_REQUIRE_TOOLS=1).
func browser(t *testing.T) *browsertest.Browser {
	t.Helper()
	path := browsertest.Require(t)
	b, err := browsertest.Start(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestReportInBrowser opens the generated file in Chromium: no console
// errors, every plot holds the markers the fixture's store implies as the
// browser laid them out, and the page renders to a non-blank screenshot.
func TestReportInBrowser(t *testing.T) {
	b := browser(t)
	r, want := fixture(t)
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteHTML(f, r, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	page, err := b.Open("file://"+path, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Problems) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(page.Problems, "\n"))
	}
	if page.Title != "batchtune report: fixture run 1" {
		t.Errorf("title = %q", page.Title)
	}
	for fig, kinds := range want {
		if diff := cmp.Diff(kinds, page.Markers[fig]); diff != "" {
			t.Errorf("figure %s: markers laid out (-want +got):\n%s", fig, diff)
		}
	}
	if n := len(page.Markers); n != 10 {
		t.Errorf("%d figures, want 10 (trials, convergence, 5 parameters, confirmation, rate, history): %v", n, page.Markers)
	}
	for _, must := range []string{"Recommended:", "server exited: out of memory", "batch_timeout_micros 20000 must be < SLO/3"} {
		if !strings.Contains(page.Text, must) {
			t.Errorf("the page's text lacks %q", must)
		}
	}
	if err := browsertest.CheckScreenshot(page.Screenshot); err != nil {
		t.Error(err)
	}
}

// TestBrowserHarnessSeesErrors: the checks above can fail. A page that
// logs an error, throws, and fetches a missing file is reported, and a
// blank page's screenshot is refused.
func TestBrowserHarnessSeesErrors(t *testing.T) {
	b := browser(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.html")
	if err := os.WriteFile(bad, []byte(`<!DOCTYPE html><html><head><link rel="icon" href="data:,"><title>bad</title></head><body>
<img src="missing.png"><script>console.error("boom"); throw new Error("thrown");</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	page, err := b.Open("file://"+bad, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(page.Problems, "\n")
	for _, must := range []string{"boom", "thrown", "missing.png"} {
		if !strings.Contains(all, must) {
			t.Errorf("problems lack %q:\n%s", must, all)
		}
	}
	blank := filepath.Join(dir, "blank.html")
	if err := os.WriteFile(blank, []byte(`<!DOCTYPE html><html><head><link rel="icon" href="data:,"><title>blank</title></head><body></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	page, err = b.Open("file://"+blank, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := browsertest.CheckScreenshot(page.Screenshot); err == nil {
		t.Error("a blank page's screenshot passed the non-blank check")
	}
}
