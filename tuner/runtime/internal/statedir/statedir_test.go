package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/tuner/runtime"
)

func TestAcquireBusy(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "s")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir, "s")
	if !errors.Is(err, runtime.ErrBusy) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())+"@") {
		t.Fatalf("second Acquire: got %v, want ErrBusy naming pid %d", err, os.Getpid())
	}
	// Another study is independent.
	other, err := Acquire(dir, "t")
	if err != nil {
		t.Fatalf("Acquire of another study: %v", err)
	}
	other.Release()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	l2, err := Acquire(dir, "s")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

func TestCheckStudy(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"ranker-v2.nightly_1", true}, // letters, digits, '.', '-', '_'
		{"", false},                   // empty
		{"../x", false},               // a path
		{"-x", false},                 // starts with a dash (a flag to a CLI)
		{"a b", false},                // space
		{strings.Repeat("a", 64), false},
	}
	for _, tt := range tests {
		if err := CheckStudy(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckStudy(%q): %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestTrialFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trial-1")
	cfg := runtime.Config{Batching: []byte("max_batch_size { value: 4 }\n")}
	b, m, err := TrialFiles(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(b); string(got) != string(cfg.Batching) {
		t.Errorf("batching file: %q", got)
	}
	if got, _ := os.ReadFile(m); string(got) != string(runtime.MonitoringConfig()) {
		t.Errorf("monitoring file: %q", got)
	}
	if got, _ := TrialDirs(filepath.Dir(dir)); len(got) != 1 || got[0] != dir {
		t.Errorf("TrialDirs: %q", got)
	}
}
