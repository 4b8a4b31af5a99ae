package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBoundedReads: issue 15's /dev/zero baseline, a FIFO study file and
// a huge study are refused at once, naming the file, without reading
// them (a FIFO with no writer would block; /dev/zero never ends).
func TestBoundedReads(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, make([]byte, MaxStudyBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       error
		fragment   string
	}{
		{"FIFO study", fifo, ErrNotRegular, "a FIFO"},
		{"/dev/zero study", "/dev/zero", ErrNotRegular, "character device"},
		{"directory", dir, ErrNotRegular, "a directory"},
		{"huge study", huge, ErrFileTooBig, "the limit is 1048576"},
	} {
		done := make(chan error, 1)
		go func() { _, err := LoadStudy(tc.path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.fragment) {
				t.Errorf("%s: %v, want %v naming %s and %q", tc.name, err, tc.want, tc.path, tc.fragment)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: LoadStudy still reading after 5s", tc.name)
		}
	}

	// confirmation.baseline: /dev/zero, through validate's file checks.
	doc := minimal + "confirmation: {baseline: /dev/zero}\n"
	s, err := ParseStudy(filepath.Join(dir, "s.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Validate(CheckFiles) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "confirmation.baseline") || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("baseline /dev/zero: %v, want a confirmation.baseline problem", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("validating a /dev/zero baseline still reading after 5s")
	}
}

// TestUpperBounds: the values of issue 15 that validated and then ran.
func TestUpperBounds(t *testing.T) {
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"huge concurrency", "load: {concurrency: 2000000000}\n", "load.concurrency: must be <= 10000, got 2000000000"},
		{"huge trials", "search: {trials: 1000000}\n", "search.trials: must be <= 10000"},
		{"too many connections", "load: {connections: 5000}\n", "load.connections: must be <= 1024"},
		{"100000 batch threads", "space: {num_batch_threads: {values: [4, 100000]}}\n", "space.num_batch_threads.values[1]: must be <= 4096, got 100000"},
		{"max int64 queue", "space: {max_enqueued_batches: {min: 1, max: 9223372036854775807}}\n", "space.max_enqueued_batches.max: must be <= 1048576"},
	} {
		_, err := ParseStudy("/s.yaml", []byte(minimal+tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// At the bounds: valid.
	if _, err := ParseStudy("/s.yaml", []byte(minimal+"load: {concurrency: 10000}\nsearch: {trials: 10000}\nspace: {num_batch_threads: {values: [4096]}}\n")); err != nil {
		t.Errorf("values at the bounds: %v", err)
	}
	// A batching.config (a baseline) is bounded the same way.
	p, err := DecodeBatching([]byte("num_batch_threads { value: 100000 }\nmax_enqueued_batches { value: 9223372036854775807 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateBatching(p); err == nil || !strings.Contains(err.Error(), "num_batch_threads: must be <= 4096") || !strings.Contains(err.Error(), "max_enqueued_batches: must be <= 1048576") {
		t.Errorf("absurd batching.config: %v", err)
	}
}

// TestThreadWarnings: above 4× the cores warns; at it, not.
func TestThreadWarnings(t *testing.T) {
	s, err := ParseStudy("/s.yaml", []byte(minimal+"space: {num_batch_threads: {values: [2, 16]}, max_batch_size: {values: [8, 4096]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := ThreadWarnings(s, 4); len(w) != 0 {
		t.Errorf("16 threads on 4 cores: %q, want no warning", w)
	}
	w := ThreadWarnings(s, 2)
	if len(w) != 1 || !strings.Contains(w[0], "space.num_batch_threads: values up to 16 exceed 4× this machine's 2 cores (8)") {
		t.Errorf("16 threads on 2 cores: %q, want one warning", w)
	}
}

// TestSLOTimeoutWarning: issue 15's space whose timeouts break the SLO/3
// rule validated silently; say how many values go.
func TestSLOTimeoutWarning(t *testing.T) {
	// slo.latency 80ms: SLO/3 is 26666 µs.
	s, err := ParseStudy("/s.yaml", []byte(minimal+"space: {batch_timeout_micros: {values: [0, 1000, 30000, 50000]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := SLOTimeoutWarning(s); !strings.Contains(w, "2 of its 4 values are not below SLO/3 (26666 µs") {
		t.Errorf("warning %q", w)
	}
	s, err = ParseStudy("/s.yaml", []byte(minimal+"space: {batch_timeout_micros: {values: [0, 1000]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := SLOTimeoutWarning(s); w != "" {
		t.Errorf("no value breaks the rule, yet %q", w)
	}
}
