package browsertest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/report/browsertest"
)

// TestRequireHelper is run by TestRequire in a child process; alone it
// only asks for a browser.
func TestRequireHelper(t *testing.T) {
	browsertest.Require(t)
}

// TestRequire: with no Chromium to be found, a browser test skips, and
// under BATCHTUNE_REQUIRE_TOOLS=1 it fails.
func TestRequire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		require string
		wantErr bool
		want    string
	}{
		// a developer without chromium: the test says why it skipped
		{"skip", "", false, "--- SKIP: TestRequireHelper"},
		// CI, make test: the missing tool is a failure
		{"fail", "1", true, "BATCHTUNE_REQUIRE_TOOLS=1 makes this a failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRequireHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "BATCHTUNE_CHROMIUM=/nonexistent/chromium", "BATCHTUNE_REQUIRE_TOOLS="+tc.require)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.wantErr || !strings.Contains(string(out), tc.want) {
				t.Errorf("err = %v, want error %v; output lacks %q:\n%s", err, tc.wantErr, tc.want, out)
			}
		})
	}
}

func TestCheckScreenshotRefusesGarbage(t *testing.T) {
	if err := browsertest.CheckScreenshot([]byte("not a png")); err == nil {
		t.Error("CheckScreenshot accepted bytes that are no PNG")
	}
}
