package daemon_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFOInStudiesDirDoesNotBlockReload: issue 15's FIFO in --studies
// blocked the daemon's start, SIGHUP and POST /reload for ever; it is now
// a load problem like any unreadable file.
func TestFIFOInStudiesDirDoesNotBlockReload(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	if err := syscall.Mkfifo(filepath.Join(r.dir, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var problems string
	go func() {
		res, err := r.d.Reload(context.Background())
		for _, p := range res.Problems {
			problems += p.File + ": " + p.Error + "\n"
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reload blocked on a FIFO for 5s")
	}
	if !strings.Contains(problems, "pipe.yaml") || !strings.Contains(problems, "not a regular file (a FIFO)") {
		t.Errorf("load problems %q, want the FIFO named", problems)
	}
}
