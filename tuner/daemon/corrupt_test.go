package daemon_test

import (
	"os"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/tuner/daemon"
)

// TestCorruptStoreFailsReadyz: issue 15's served store with a page's
// flags flipped. The first read fails with "store: corrupt" (no panic, no
// leaked lock), later reads say the same instead of "in use", and /readyz
// turns 503 while /healthz stays 200.
func TestCorruptStoreFailsReadyz(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{})
	a.start()
	api := daemon.PathAPI
	a.check(t, []apiCase{{"readyz before", "GET", "/readyz", "", "", 200, `"ready": true`}})

	path := a.db.Path()
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Put the good file back before the store helper checks it.
	t.Cleanup(func() { os.WriteFile(path, good, 0o600) })
	bad := append([]byte(nil), good...)
	const pageSize = 4096
	if len(bad) < 4*pageSize {
		t.Fatalf("store of %d bytes: want at least 4 pages", len(bad))
	}
	for off := 2 * pageSize; off+16 <= len(bad); off += pageSize {
		bad[off+8], bad[off+9] = 0x5a, 0x5a
	}
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}

	for i := 0; i < 3; i++ {
		code, body := a.call("GET", api+"/studies/s/runs", "", "")
		if code != 500 || !strings.Contains(body, "store: corrupt") || strings.Contains(body, "in use") {
			t.Fatalf("read %d after the corruption: %d %s, want 500 store: corrupt", i+1, code, body)
		}
	}
	a.check(t, []apiCase{
		{"readyz fails", "GET", "/readyz", "", "", 503, `store: corrupt`},
		{"healthz stays", "GET", "/healthz", "", "", 200, `"ok"`},
	})
}
