package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/report/reporttest"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// fixtureStore writes the report fixture into a store file and closes it.
func fixtureStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "batchtune.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reporttest.Populate(context.Background(), db, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReportCommandWritesEachFormat(t *testing.T) {
	db := fixtureStore(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		format, file, must string
	}{
		// the page, with the verdict and a plot
		{"html", "r.html", `<figure id="fig-trials"`},
		// the same content as data
		{"json", "r.json", `"winner": 8`},
		// the tables
		{"text", "r.txt", "recommended: batch=32"},
	} {
		out := filepath.Join(dir, tc.file)
		if rc := run([]string{"batchtune", "report", "--db", db, "--format", tc.format, "-o", out}); rc != 0 {
			t.Fatalf("report --format %s exited %d", tc.format, rc)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.must) {
			t.Errorf("report --format %s lacks %q", tc.format, tc.must)
		}
		if tc.format == "json" && !json.Valid(b) {
			t.Errorf("report --format json is not JSON")
		}
	}
	if rc := run([]string{"batchtune", "report", "--db", db, "--format", "pdf", "-o", filepath.Join(dir, "x")}); rc == 0 {
		t.Error("report --format pdf succeeded; want an error naming the formats")
	}
	if rc := run([]string{"batchtune", "report", "--db", db, "--run", "7", "-o", filepath.Join(dir, "x")}); rc == 0 {
		t.Error("report --run 7 (no such run) succeeded")
	}
}

func TestVersionFlag(t *testing.T) {
	if v := appVersion(); v == "" || v == "unknown" {
		t.Errorf("appVersion() = %q", v)
	}
	if rc := run([]string{"batchtune", "--version"}); rc != 0 {
		t.Errorf("batchtune --version exited %d", rc)
	}
}

func TestStudyArgAndConfigFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"argument", []string{"s.yaml"}, "s.yaml", false},
		{"flag", []string{"--config", "s.yaml"}, "s.yaml", false},
		{"both, the same", []string{"--config", "s.yaml", "s.yaml"}, "s.yaml", false},
		{"both, different", []string{"--config", "a.yaml", "b.yaml"}, "", true},
		{"two arguments", []string{"a.yaml", "b.yaml"}, "", true},
		{"none: the demo study", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			var gotErr error
			app := &cli.App{Flags: []cli.Flag{&cli.StringFlag{Name: "config"}}, Action: func(c *cli.Context) error {
				got, gotErr = studyArg(c, "tune")
				return nil
			}}
			if err := app.Run(append([]string{"x"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if (gotErr != nil) != tc.wantErr || got != tc.want {
				t.Errorf("studyArg = %q, %v; want %q, error %v", got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}

func TestValidateTakesConfigFlag(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rc := run([]string{"batchtune", "validate", "--config", bad}); rc == 0 {
		t.Error("validate --config BAD exited 0; want the problems reported")
	}
	if rc := run([]string{"batchtune", "validate"}); rc == 0 {
		t.Error("validate with no study exited 0")
	}
}

func TestTuneLoggerFormats(t *testing.T) {
	var b bytes.Buffer
	log, structured, err := tuneLogger(&b, "json", false)
	if err != nil || !structured {
		t.Fatalf("json: structured %v, err %v", structured, err)
	}
	log.Info("trial ended", "trial", 3)
	if !json.Valid(bytes.TrimSpace(b.Bytes())) || !strings.Contains(b.String(), `"trial":3`) {
		t.Errorf("json log = %q", b.String())
	}
	b.Reset()
	log, structured, _ = tuneLogger(&b, "", false)
	log.Info("trial ended")
	if structured || b.Len() != 0 {
		t.Errorf("default: structured %v, info logged %q; want plain lines and warnings only", structured, b.String())
	}
	if _, _, err := tuneLogger(&b, "xml", false); err == nil {
		t.Error("--log-format xml accepted")
	}
}

// TestPlainTrialLines: without a terminal and without --log-format, tune
// prints one plain line per finished trial, and a trial that measured a
// batch and a P99 but no rate says so instead of "0.0 req/s".
func TestPlainTrialLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, false, nil)
	obj := 0.0
	p.event(tuner.Event{Stage: tuner.StageSearch, Index: 1, Total: 2, Trial: &store.Trial{Seq: 1, State: store.TrialStarting}})
	p.event(tuner.Event{Stage: tuner.StageSearch, Index: 1, Total: 2, Trial: &store.Trial{Seq: 1, State: store.TrialEarlyStopped, Objective: &obj,
		Config: []store.Param{{Name: "max_batch_size", Value: 16}}, Reason: "P99 180ms > SLO 100ms",
		Summary: store.Summary{P99: 180 * time.Millisecond, MeanBatch: 16, Requests: 40}}})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want one per finished trial:\n%s", len(lines), b.String())
	}
	l := lines[0]
	if strings.Contains(l, "\033") || strings.Contains(l, "0.0 req/s") || !strings.Contains(l, "— (stopped early") || !strings.Contains(l, "batch=16") {
		t.Errorf("trial line = %q", l)
	}
}
