package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFileWarning: a world-readable token file is named in a
// warning; a private one, or none, is not.
func TestTokenFileWarning(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{
		{0o600, false},
		{0o640, false},
		{0o644, true},
		{0o604, true},
	} {
		p := filepath.Join(dir, "token")
		if err := os.WriteFile(p, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		got := tokenFileWarning(p)
		if (got != "") != tc.warn || (tc.warn && !strings.Contains(got, p)) {
			t.Errorf("mode %04o: warning %q, want one: %v", tc.mode, got, tc.warn)
		}
	}
	if got := tokenFileWarning(""); got != "" {
		t.Errorf("no token file: %q", got)
	}
}
