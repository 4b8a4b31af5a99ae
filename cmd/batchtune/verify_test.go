package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/store"
)

// TestVerifyRefusesBeforeStarting: what verify cannot do is said before a
// server starts, with the usage status where the command line is at fault.
func TestVerifyRefusesBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	study := filepath.Join(dir, "v.yaml")
	doc := "name: v\ntarget:\n  runtime: process\n  model: {name: m, base_path: " + dir + "}\n  process: {binary: /bin/true}\nslo:\n  latency: 80ms\n"
	if err := os.WriteFile(study, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "b.config")
	if err := os.WriteFile(cfg, []byte("max_batch_size { value: 8 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "b.db")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no study", []string{"verify", "--db", dbPath}, exitUsage, "name the study"},
		{"flags without config", []string{"verify", "--db", dbPath, "--flags=--grpc_max_threads=8", study}, exitUsage, "--flags goes with --config"},
		{"run and config", []string{"verify", "--db", dbPath, "--run", "1", "--config", cfg, study}, exitUsage, "--run or --config"},
		{"headroom", []string{"verify", "--db", dbPath, "--headroom", "1.5", study}, exitUsage, "--headroom must be in (0, 1]"},
		{"interval over duration", []string{"verify", "--db", dbPath, "--duration", "5s", "--interval", "10s", study}, exitUsage, "interval: 10s is longer than the duration 5s"},
		{"no recommendation yet", []string{"verify", "--db", dbPath, study}, exitError, "study v has no runs"},
		{"config needs a rate", []string{"verify", "--db", dbPath, "--config", cfg, study}, exitUsage, "--rate is required with --config"},
		{"reserved flag", []string{"verify", "--db", dbPath, "--config", cfg, "--flags=--port=9", "--rate", "10", study}, exitUsage, "--port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errw, code := batchtune(t, tc.args...)
			if code != tc.code || !strings.Contains(errw, tc.want) {
				t.Errorf("exit %d %q, want %d and %q", code, errw, tc.code, tc.want)
			}
		})
	}

	// A recommendation from a run that did not measure capacity: the
	// rate must be given, and the message says how to get one.
	ctx := context.Background()
	db, err := store.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := &store.Run{Study: "v", Kind: store.KindOneShot}
	if err := db.PutStudy(ctx, &store.Study{Name: "v", SpecHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRecommendation(ctx, &store.Recommendation{Study: "v", Run: run.ID, Batching: "max_batch_size { value: 8 }\n", Accepted: true}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, errw, code := batchtune(t, "verify", "--db", dbPath, study)
	if code != exitUsage || !strings.Contains(errw, "--rate is required") || !strings.Contains(errw, "objective: max_capacity") {
		t.Errorf("no capacity: exit %d %q, want usage and how to get a capacity", code, errw)
	}

	// A capacity whose interval is too wide to plan on (two repeats far
	// apart) gives no rate either: planning on 2.3 req/s tests nothing.
	if db, err = store.Open(dbPath, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRecommendation(ctx, &store.Recommendation{Study: "v", Run: run.ID, Batching: "max_batch_size { value: 8 }\n", Accepted: true, Capacity: 151.5, CapacityLow: 2.3, CapacityHigh: 10025.3}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, errw, code = batchtune(t, "verify", "--db", dbPath, study)
	if code != exitUsage || !strings.Contains(errw, "too wide") || !strings.Contains(errw, "--rate is required") {
		t.Errorf("wide interval: exit %d %q, want usage, the interval too wide and --rate", code, errw)
	}

	// With a measured capacity the rate is capacity_low x headroom. The
	// "server" here (/bin/true) exits at once: not judged (exit 1), and
	// the attempt is stored beside the run.
	if db, err = store.Open(dbPath, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRecommendation(ctx, &store.Recommendation{Study: "v", Run: run.ID, Batching: "max_batch_size { value: 8 }\n", Accepted: true, Capacity: 1100, CapacityLow: 1000, CapacityHigh: 1200}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, errw, code = batchtune(t, "verify", "--db", dbPath, "--state-dir", filepath.Join(dir, "state"), "--duration", "2s", "--interval", "1s", study)
	if code != exitError || !strings.Contains(errw, "650.0 req/s") || !strings.Contains(errw, "not judged") {
		t.Errorf("capacity 1000 x 0.65: exit %d %q, want 650 req/s and not judged", code, errw)
	}
	if db, err = store.Open(dbPath, &store.Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, err := db.LatestVerification(ctx, "v", run.ID)
	if err != nil || v.Verdict != store.VerifyError || v.Rate != 650 || v.RateSource != "capacity_low 1000.0 x headroom 0.65" {
		t.Errorf("stored %+v, %v: want an error verdict at 650 req/s from the capacity", v, err)
	}
}
