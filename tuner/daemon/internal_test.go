package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rollout.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunRollout(t *testing.T) {
	dir := t.TempDir()
	export := filepath.Join(dir, "batching.config")
	t.Run("ok", func(t *testing.T) {
		out := filepath.Join(dir, "args")
		bin := script(t, `printf '%s\n' "$@" > `+out+`; echo "study=$BATCHTUNE_STUDY"; echo to-stderr >&2`)
		res := runRollout(context.Background(), []string{bin, "--reload", "tfs"}, export, 10*time.Second, []string{"BATCHTUNE_STUDY=s1"})
		if res.Result != RolloutOK || res.ExitCode != 0 {
			t.Fatalf("result %s exit %d error %q, want ok 0", res.Result, res.ExitCode, res.Error)
		}
		args, _ := os.ReadFile(out)
		// No shell in between: the arguments arrive as given, the export
		// path last.
		if diff := cmp.Diff("--reload\ntfs\n"+export+"\n", string(args)); diff != "" {
			t.Errorf("arguments (-want +got):\n%s", diff)
		}
		if !strings.Contains(res.Output, "study=s1") || !strings.Contains(res.Output, "to-stderr") {
			t.Errorf("output %q lacks stdout's and stderr's lines", res.Output)
		}
		if diff := cmp.Diff([]string{bin, "--reload", "tfs", export}, res.Argv); diff != "" {
			t.Errorf("argv (-want +got):\n%s", diff)
		}
	})
	t.Run("fails", func(t *testing.T) {
		bin := script(t, "echo 'kubectl: connection refused' >&2\nexit 3\n")
		res := runRollout(context.Background(), []string{bin}, export, 10*time.Second, nil)
		if res.Result != RolloutFailed || res.ExitCode != 3 || !strings.Contains(res.Output, "connection refused") {
			t.Errorf("got result %s exit %d output %q; want failed, 3, the error line", res.Result, res.ExitCode, res.Output)
		}
	})
	t.Run("times out, whole group killed", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		// The script's child sleeps on; the group kill must take it too.
		bin := script(t, "sleep 60 &\necho $! > "+pidFile+"\nwait\n")
		start := time.Now()
		res := runRollout(context.Background(), []string{bin}, export, 300*time.Millisecond, nil)
		if res.Result != RolloutTimeout || res.ExitCode != -1 {
			t.Errorf("got result %s exit %d, want timeout, -1", res.Result, res.ExitCode)
		}
		if el := time.Since(start); el > 30*time.Second {
			t.Errorf("took %s: the kill did not end it", el)
		}
		data, _ := os.ReadFile(pidFile)
		if pid := strings.TrimSpace(string(data)); pid != "" {
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat("/proc/" + pid); err != nil {
					break
				}
				if stat, _ := os.ReadFile("/proc/" + pid + "/stat"); strings.Contains(string(stat), ") Z") {
					break // a zombie: dead, waiting for its reaper
				}
				if time.Now().After(deadline) {
					t.Errorf("the rollout's child %s outlived the kill", pid)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	t.Run("missing command", func(t *testing.T) {
		res := runRollout(context.Background(), []string{filepath.Join(dir, "nope")}, export, time.Second, nil)
		if res.Result != RolloutFailed || res.Error == "" {
			t.Errorf("got %+v, want failed with an error", res)
		}
	})
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 16}
	b.Write([]byte("line one\n"))
	b.Write([]byte("line two\nline three\n"))
	// Only the end is kept, starting at a whole line.
	if got, want := b.String(), "…\nline three\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	short := &tailBuffer{max: 100}
	short.Write([]byte("all of it\n"))
	if got := short.String(); got != "all of it\n" {
		t.Errorf("short output: got %q", got)
	}
}

func TestLoadStudies(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	study := func(name string) string {
		return "name: " + name + `
target:
  runtime: process
  model: {name: m, base_path: /models/m}
  process: {binary: /bin/true}
slo: {latency: 100ms}
schedule: {cron: "0 3 * * *", time_zone: Europe/Berlin}
`
	}
	write("a.yaml", study("alpha"))
	write("b.yml", study("beta"))
	write("c.yaml", study("alpha"))                                 // a second alpha
	write("d.yaml", "name: delta\nslo: {latency: 100}\nbogus: 1\n") // several problems
	write(".hidden.yaml", "not: a study")
	write("notes.txt", "not a study either")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}

	loaded, problems, err := loadStudies(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ls := range loaded {
		names = append(names, ls.study.Name+"@"+filepath.Base(ls.file))
		if ls.sched == nil || ls.sched.Location.String() != "Europe/Berlin" {
			t.Errorf("%s: schedule %+v, want one in Europe/Berlin", ls.study.Name, ls.sched)
		}
	}
	if diff := cmp.Diff([]string{"alpha@a.yaml", "beta@b.yml"}, names); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
	if len(problems) != 2 {
		t.Fatalf("problems: got %d, want 2: %+v", len(problems), problems)
	}
	if p := problems[0]; filepath.Base(p.File) != "c.yaml" || !strings.Contains(p.Error, "already defined in") {
		t.Errorf("duplicate: got %+v", p)
	}
	// Every problem of the bad file, each with its line.
	if p := problems[1]; filepath.Base(p.File) != "d.yaml" || !strings.Contains(p.Error, "d.yaml:2: slo.latency") || !strings.Contains(p.Error, "d.yaml:3: bogus") {
		t.Errorf("bad file: got %+v, want its problems with lines", p)
	}

	if _, _, err := loadStudies(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("a missing directory: want an error")
	}
}

// TestVerifierRate: schedule.verify without a rate takes it from the
// recommendation's capacity; one with none, or with an interval too wide
// to plan on, fails that soak (the run is kept) and says to set the rate.
func TestVerifierRate(t *testing.T) {
	s := &configs.Study{Name: "v"}
	s.Schedule.Verify = configs.ScheduleVerify{Enabled: true, Headroom: 0.65}
	v := verifier(s, slog.New(slog.DiscardHandler))
	for _, c := range []struct {
		rec  store.Recommendation
		want string
	}{
		{store.Recommendation{Run: 4, Capacity: 151.5, CapacityLow: 2.3, CapacityHigh: 10025.3}, "too wide"},
		{store.Recommendation{Run: 4, Objective: 1700}, "no measured capacity"},
	} {
		_, err := v(context.Background(), nil, &c.rec)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "set schedule.verify.rate") {
			t.Errorf("%+v: %v, want %q and the remedy", c.rec, err, c.want)
		}
	}
}
