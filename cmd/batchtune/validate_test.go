package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner"
)

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("server", "#!/bin/sh\n", 0o755)
	if err := os.Mkdir(filepath.Join(dir, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := write("good.yaml", `name: good
target:
  runtime: process
  model: {name: m, base_path: model}
  process: {binary: ./server}
slo: {latency: 80ms}
`, 0o644)
	bad := write("bad.yaml", `name: bad
target:
  runtime: process
  model: {name: m, base_path: model}
  process: {binary: ./server}
load:
  concurrency: 0
slo: {latency: 80ms}
`, 0o644)
	missingFiles := write("missing.yaml", `name: missing
target:
  runtime: process
  model: {name: m, base_path: nomodel}
  process: {binary: ./server}
slo: {latency: 80ms}
`, 0o644)

	tests := []struct {
		name string
		args []string
		code int
		// stderr fragments that must appear
		want []string
	}{
		// A valid study passes.
		{"valid", []string{good}, 0, nil},
		// An invalid value is reported with file, line and field.
		{"invalid value", []string{good, bad}, 1, []string{bad + ":7: load.concurrency: must be >= 1, got 0", "1 of 2 studies have problems"}},
		// Files the study names are checked on this machine.
		{"missing model dir", []string{missingFiles}, 1, []string{missingFiles + ":4: target.model.base_path: " + filepath.Join(dir, "nomodel") + ": no such file or directory"}},
		// A study file that does not exist.
		{"no such file", []string{filepath.Join(dir, "nope.yaml")}, 1, []string{"nope.yaml: no such file or directory"}},
		// Nothing to validate is a usage error.
		{"no args", nil, 1, []string{"name at least one study file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr := captureStderr(t, func() {
				if code := run(append([]string{"batchtune", "validate", "-q"}, tt.args...)); code != tt.code {
					t.Errorf("exit code %d, want %d", code, tt.code)
				}
			})
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.code == 0 && stderr != "" {
				t.Errorf("unexpected stderr:\n%s", stderr)
			}
		})
	}
}

// TestValidateExamples runs validate over the shipped examples that can be
// checked on any machine: their syntax, values, space and strategy
// (CheckFiles needs the built stand-in and real model directories, so it is
// not run here).
func TestValidateExamples(t *testing.T) {
	files, err := filepath.Glob("../../configs/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	checks := []configs.StudyCheck{tuner.SpaceCheck(2, 0)}
	for _, f := range files {
		if filepath.Base(f) == "reference.yaml" {
			continue
		}
		if err := validateStudy(f, checks); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// captureStderr runs f with os.Stderr redirected and returns what it wrote.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b := new(strings.Builder)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		done <- b.String()
	}()
	defer func() { os.Stderr = saved }()
	f()
	w.Close()
	return <-done
}
