package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// daemonProc is `batchtune daemon` running as a child process.
type daemonProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	db     string
	url    string
	exited chan error
}

func startDaemon(t *testing.T, bin, studies, db, stateDir string) *daemonProc {
	t.Helper()
	p := &daemonProc{t: t, stderr: &syncBuffer{}, db: db, exited: make(chan error, 1)}
	p.cmd = exec.Command(filepath.Join(bin, "batchtune"), "daemon", "--studies", studies, "--db", db,
		"--listen", "127.0.0.1:0", "--state-dir", stateDir)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	// Loopback needs no token; one from the environment would be used.
	p.cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "BATCHTUNE_API_TOKEN=") })
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	// The daemon records its API's address beside the store.
	p.waitFor("the daemon's address file", func() bool {
		data, err := os.ReadFile(db + ".daemon.json")
		if err != nil {
			return false
		}
		var info struct {
			PID int    `json:"pid"`
			URL string `json:"url"`
		}
		if json.Unmarshal(data, &info) != nil || info.PID != p.cmd.Process.Pid {
			return false // a previous daemon's, being replaced
		}
		p.url = info.URL
		return true
	})
	return p
}

func (p *daemonProc) waitFor(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		select {
		case err := <-p.exited:
			p.exited <- err
			p.t.Fatalf("the daemon exited (%v) while waiting for %s:\n%s", err, what, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s:\n%s", what, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// progress asks the API where the study's run stands.
func (p *daemonProc) progress(study string) *daemon.Progress {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := daemon.NewClient(p.url, nil, "").Study(ctx, study)
	if err != nil {
		return nil
	}
	return s.Current
}

// signal sends sig to the daemon.
func (p *daemonProc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for the daemon to exit and returns its exit code.
func (p *daemonProc) wait() int {
	p.t.Helper()
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			p.t.Fatal(err)
		}
		return 0
	case <-time.After(3 * time.Minute):
		p.t.Fatalf("the daemon did not exit within 3 minutes:\n%s", p.stderr.String())
		return -1
	}
}

// runTrials reads a run's trials from the store, read-only beside the
// daemon or after it.
func runTrials(t *testing.T, db, study string, run uint64) (*store.Run, []store.Trial) {
	t.Helper()
	s, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Run(context.Background(), study, run)
	if err != nil {
		t.Fatal(err)
	}
	trials, err := s.Trials(context.Background(), study, run)
	if err != nil {
		t.Fatal(err)
	}
	return r, trials
}

func runRecommendation(t *testing.T, db, study string, seq uint64) store.Recommendation {
	t.Helper()
	s, err := store.Open(db, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Recommendations(context.Background(), study)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Seq == seq {
			return r
		}
	}
	t.Fatalf("no recommendation %d of study %s", seq, study)
	return store.Recommendation{}
}

func configKey(ps []store.Param) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s=%d ", p.Name, p.Value)
	}
	return b.String()
}

// TestSIGTERMDuringATrial runs `batchtune daemon` as a child process and
// stops it mid-trial three times: one SIGTERM (the trial finishes, the run
// is left resumable), two (the trial is aborted), and a last clean stop.
// Each time no stand-in process is left and the store is intact; each
// restart resumes the run: the aborted trial is redone, no finished trial
// is redone, and the run finishes. SIGHUP reloads the studies. batchtune
// status reads the API while the daemon runs and the store once it is gone.
func TestSIGTERMDuringATrial(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stand-in and the batchtune binary for a minute or two")
	}
	bin := binaries(t)
	dir := t.TempDir()
	model := standInModel(t, dir)
	studies := filepath.Join(dir, "studies")
	if err := os.Mkdir(studies, 0o755); err != nil {
		t.Fatal(err)
	}
	// Trials of 3 to 4 seconds of measurement, so that a signal lands in
	// one; a schedule of a second, so that the run starts at once.
	doc := standInStudy("ranker", filepath.Join(bin, "tfs-emulator"), model, filepath.Join(dir, "batching.config"),
		"@every 1s", "min_duration: 3s\n  max_duration: 4s")
	if err := os.WriteFile(filepath.Join(studies, "ranker.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	db, stateDir := filepath.Join(dir, "batchtune.db"), filepath.Join(dir, "state")
	afterStop := func(p *daemonProc, what string) {
		t.Helper()
		if left := leftovers(stateDir); len(left) > 0 {
			t.Errorf("%s: stand-in processes left: %v", what, left)
		}
		if err := storetest.Check(db); err != nil {
			t.Errorf("%s: store check: %v", what, err)
		}
		if _, err := os.Stat(db + ".daemon.json"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the daemon's address file is left: %v", what, err)
		}
	}
	measuring := func(p *daemonProc, minTrial uint64) uint64 {
		t.Helper()
		var seq uint64
		p.waitFor(fmt.Sprintf("run 1 measuring a trial after %d", minTrial), func() bool {
			pr := p.progress("ranker")
			if pr != nil && pr.Run == 1 && pr.Trial > minTrial && pr.TrialState == store.TrialMeasuring {
				seq = pr.Trial
				return true
			}
			return false
		})
		return seq
	}

	// 1. One SIGTERM during the second trial: it finishes, the run stays
	// resumable.
	p := startDaemon(t, bin, studies, db, stateDir)
	first := measuring(p, 1)
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d after one SIGTERM:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "graceful stop") {
		t.Errorf("no graceful stop in the log:\n%s", p.stderr.String())
	}
	afterStop(p, "graceful stop")
	run, trials := runTrials(t, db, "ranker", 1)
	if run.State != store.RunInterrupted {
		t.Errorf("after a graceful stop run 1 is %s, want interrupted", run.State)
	}
	if n := uint64(len(trials)); n != first || trials[n-1].State != store.TrialSucceeded {
		t.Fatalf("after a graceful stop: %d trials, last %s; want %d, the one in progress finished", n, trials[n-1].State, first)
	}
	finished := map[string]bool{}
	for _, tr := range trials {
		if tr.Role == store.RoleSearch && tr.State.Terminal() && tr.State != store.TrialInterrupted {
			finished[configKey(tr.Config)] = true
		}
	}

	// 2. Restarted, the run resumes; two SIGTERMs abort its next trial.
	p = startDaemon(t, bin, studies, db, stateDir)
	aborted := measuring(p, first)
	p.signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Errorf("exit code %d after two SIGTERMs:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "resumed=true") {
		t.Errorf("the restarted daemon did not resume run 1:\n%s", p.stderr.String())
	}
	afterStop(p, "abort")
	_, trials = runTrials(t, db, "ranker", 1)
	if n := uint64(len(trials)); n != aborted || trials[n-1].State != store.TrialInterrupted {
		t.Fatalf("after an abort: %d trials, last %s; want %d, the one in progress interrupted", n, trials[n-1].State, aborted)
	}
	redo, redoRole := configKey(trials[aborted-1].Config), trials[aborted-1].Role

	// 3. Restarted again, the run finishes; status asks the API.
	p = startDaemon(t, bin, studies, db, stateDir)
	p.waitFor("run 1 finished", func() bool {
		r, _ := runTrials(t, db, "ranker", 1)
		return r.State == store.RunFinished
	})
	// SIGHUP reloads the studies: a new on-demand study appears.
	other := standInStudy("other", filepath.Join(bin, "tfs-emulator"), model, filepath.Join(dir, "other.config"), "", "min_duration: 1s")
	if err := os.WriteFile(filepath.Join(studies, "other.yaml"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	p.signal(syscall.SIGHUP)
	p.waitFor("the reloaded study", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := daemon.NewClient(p.url, nil, "").Study(ctx, "other")
		return err == nil && st.Schedule == nil && st.State == daemon.StateIdle
	})
	out, err := exec.Command(filepath.Join(bin, "batchtune"), "status", "--db", db).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "source: daemon API at "+p.url) || !strings.Contains(string(out), "ranker") {
		t.Errorf("status while the daemon runs: %v\n%s", err, out)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Errorf("exit code %d:\n%s", code, p.stderr.String())
	}
	afterStop(p, "final stop")
	run, trials = runTrials(t, db, "ranker", 1)
	if run.Outcome != store.OutcomeRecommended {
		t.Errorf("run 1 ended %s %s: %s", run.State, run.Outcome, run.Detail)
	}
	// Stopped and resumed twice, it still recommends the clear winner
	// (max_batch_size 16 measures about twice 2's throughput here).
	if rec := runRecommendation(t, db, "ranker", run.Recommendation); !strings.Contains(rec.Batching, "max_batch_size { value: 16 }") {
		t.Errorf("run 1 recommended\n%s\nwant max_batch_size 16 (%s)", rec.Batching, run.Detail)
	}
	for _, tr := range trials {
		t.Logf("run 1 trial %d %s %s %s objective %v: %s", tr.Seq, tr.Role, tr.State, configKey(tr.Config), deref(tr.Objective), tr.Why)
	}
	redone := false
	for _, tr := range trials[aborted:] {
		k := configKey(tr.Config)
		if tr.Role == store.RoleSearch && finished[k] {
			t.Errorf("trial %d redid %s, which had finished before the stops", tr.Seq, k)
		}
		if k == redo && tr.Role == redoRole && tr.State == store.TrialSucceeded {
			redone = true
		}
	}
	if !redone {
		var lines bytes.Buffer
		for _, tr := range trials {
			fmt.Fprintf(&lines, "  %d %s %s %s\n", tr.Seq, tr.Role, tr.State, configKey(tr.Config))
		}
		t.Errorf("the aborted trial (%s) was not redone:\n%s", redo, lines.String())
	}
	out, err = exec.Command(filepath.Join(bin, "batchtune"), "status", "--db", db).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "source: store "+db) || !strings.Contains(string(out), "ranker ") {
		t.Errorf("status after the daemon: %v\n%s", err, out)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
