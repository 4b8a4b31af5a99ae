package store_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// The test binary re-executes itself as a second process for the lock
// tests: with STORE_HELPER set, TestMain runs the helper instead of tests.
const helperEnv = "STORE_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Getenv("STORE_PATH")))
	}
	os.Exit(m.Run())
}

// helperResult is what a "try" helper reports on stdout.
type helperResult struct {
	Err     string   `json:"err,omitempty"`
	InUse   bool     `json:"in_use"`
	Studies []string `json:"studies,omitempty"`
	Elapsed string   `json:"elapsed"`
}

// helper runs one of the second-process roles:
//
//	writer     store.Open for writing, one study "from-child"; hold until stdin closes
//	hold-bolt  open the bbolt file directly (its file lock); hold until stdin closes
//	flock-only take PATH.lock's flock without writing a holder record; hold
//	try-rw, try-ro  open with a 300ms timeout, list studies, report JSON, exit
func helper(mode, path string) int {
	hold := func() {
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	switch mode {
	case "writer":
		db, err := store.Open(path, &store.Options{Command: "helper writer"})
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		if err := db.PutStudy(ctx, &store.Study{Name: "from-child"}); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		hold()
		return 0
	case "hold-bolt":
		b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		defer b.Close()
		hold()
		return 0
	case "flock-only":
		f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		hold()
		return 0
	case "writer-loop":
		// Writes trials through their states and prints each state once
		// PutTrial has returned, until killed.
		db, err := store.Open(path, &store.Options{Command: "helper writer-loop"})
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		if err := db.PutStudy(ctx, &store.Study{Name: "s"}); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		r := &store.Run{Study: "s", Kind: store.KindOneShot}
		if err := db.CreateRun(ctx, r); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ready")
		for i := int64(1); ; i++ {
			tr := &store.Trial{Study: "s", Run: r.ID, State: store.TrialSuggested, Config: []store.Param{{Name: "max_batch_size", Value: i}}}
			if err := db.AddTrial(ctx, tr); err != nil {
				fmt.Println("error:", err)
				return 1
			}
			for _, st := range []store.TrialState{store.TrialStarting, store.TrialWarming, store.TrialMeasuring, store.TrialSucceeded} {
				tr.Transition(st, time.Now())
				if err := db.PutTrial(ctx, tr); err != nil {
					fmt.Println("error:", err)
					return 1
				}
				fmt.Printf("%d %s\n", tr.Seq, st)
			}
		}
	case "try-rw", "try-ro":
		start := time.Now()
		var res helperResult
		db, err := store.Open(path, &store.Options{ReadOnly: mode == "try-ro", Timeout: 300 * time.Millisecond, Command: "helper " + mode})
		if err == nil {
			var ss []store.Study
			ss, err = db.Studies(ctx)
			for _, s := range ss {
				res.Studies = append(res.Studies, s.Name)
			}
			db.Close()
		}
		if err != nil {
			res.Err = err.Error()
			res.InUse = errors.Is(err, store.ErrInUse)
		}
		res.Elapsed = time.Since(start).String()
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return 0
	}
	fmt.Println("unknown helper mode", mode)
	return 2
}

// child is a helper process holding a role until released.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder starts a helper that takes a lock and waits until it is
// released (or killed); it returns once the helper has the lock.
func startHolder(t *testing.T, mode, path string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "STORE_PATH="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { c.kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("helper %s did not get ready: %q, %v", mode, line, err)
	}
	return c
}

// release lets the helper close cleanly and waits for it.
func (c *child) release(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("helper exited: %v", err)
	}
}

// kill ends the helper as a crash would (SIGKILL).
func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

// try runs a try-rw or try-ro helper and returns its report.
func try(t *testing.T, mode, path string) helperResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "STORE_PATH="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v: %s", mode, err, out)
	}
	var res helperResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper %s output %q: %v", mode, out, err)
	}
	return res
}

// TestSecondWriterGetsHolder: while this process writes, a second process
// that opens for writing fails after its timeout, not a hang, with an
// error naming this process; a second process opening read-only reads.
func TestSecondWriterGetsHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := store.Open(path, &store.Options{Command: "batchtune tune"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	newRun(t, db, "held")
	host, _ := os.Hostname()

	res := try(t, "try-rw", path)
	t.Logf("second writer: %s (after %s)", res.Err, res.Elapsed)
	want := fmt.Sprintf("store: %s is in use by pid %d on host %s (batchtune tune, since ", path, os.Getpid(), host)
	if !res.InUse || !strings.HasPrefix(res.Err, want) {
		t.Errorf("second writer got %+v\nwant an ErrInUse starting %q", res, want)
	}
	if d, _ := time.ParseDuration(res.Elapsed); d > 3*time.Second {
		t.Errorf("second writer took %s to give up with a 300ms timeout", d)
	}

	// bbolt's file lock is only held during a transaction here, so a
	// read-only open in another process reads while this one writes.
	res = try(t, "try-ro", path)
	if res.Err != "" || len(res.Studies) != 1 || res.Studies[0] != "held" {
		t.Errorf("reader while a writer holds the store: %+v", res)
	}
	// The writer goes on writing after the reader.
	newRun(t, db, "held2")
}

// TestWriterCrashReleases: a writer in another process holds the store; this
// process is refused with the child's pid; readers read its data; once the
// child is killed (a crash), this process takes the store over and the
// stale holder record is replaced, not believed.
func TestWriterCrashReleases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	c := startHolder(t, "writer", path)

	_, err := store.Open(path, &store.Options{Timeout: 200 * time.Millisecond})
	var iu *store.InUseError
	if !errors.As(err, &iu) || iu.Holder == nil || iu.Holder.PID != c.cmd.Process.Pid || iu.Holder.Command != "helper writer" {
		t.Fatalf("open while a child writes: got %v, want an InUseError naming pid %d", err, c.cmd.Process.Pid)
	}
	ro, err := store.Open(path, &store.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("read-only open while a child writes: %v", err)
	}
	if s, err := ro.Study(ctx, "from-child"); err != nil || s.Name != "from-child" {
		t.Errorf("reading the child's study: %v, %v", s, err)
	}
	ro.Close()

	c.kill()
	db, err := store.Open(path, &store.Options{Timeout: time.Second, Command: "after crash"})
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	defer db.Close()
	b, err := os.ReadFile(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	var h store.Holder
	if err := json.Unmarshal(b, &h); err != nil || h.PID != os.Getpid() || h.Command != "after crash" {
		t.Errorf("holder record after takeover: %s (%v)", b, err)
	}
	// The file the crashed writer left is sound, and a read-only check
	// runs while this process holds the writer lock.
	if err := storetest.Check(path); err != nil {
		t.Errorf("integrity after the crash: %v", err)
	}
}

// TestStaleHolderNotBelieved: the lock is held by a process that wrote no
// record, and the record left names a dead process. The error must not
// name the dead process as the holder.
func TestStaleHolderNotBelieved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	newRun(t, db, "s")
	db.Close()

	// A pid that certainly belonged to a process that has exited.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	stale, _ := json.Marshal(store.Holder{PID: dead.Process.Pid, Host: host, Command: "batchtune tune", Since: time.Now()})
	if err := os.WriteFile(path+".lock", stale, 0o644); err != nil {
		t.Fatal(err)
	}
	startHolder(t, "flock-only", path)
	_, err = store.Open(path, &store.Options{Timeout: 200 * time.Millisecond})
	var iu *store.InUseError
	if !errors.As(err, &iu) {
		t.Fatalf("got %v, want an InUseError", err)
	}
	t.Logf("stale: %v", err)
	wantNote := fmt.Sprintf("the holder record names pid %d, which has exited: not believed", dead.Process.Pid)
	if iu.Holder != nil || iu.Note != wantNote {
		t.Errorf("got holder %+v note %q; want no holder and note %q", iu.Holder, iu.Note, wantNote)
	}
	if !strings.Contains(err.Error(), "is in use by another process") {
		t.Errorf("message: %v", err)
	}
}

// TestStaleRecordWithFreeLock: a record left by a dead writer does not
// stop the next one: the lock is free, so Open succeeds at once.
func TestStaleRecordWithFreeLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	stale, _ := json.Marshal(store.Holder{PID: 999999, Host: "elsewhere", Command: "batchtune daemon", Since: time.Now()})
	if err := os.WriteFile(path+".lock", stale, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	db, err := store.Open(path, &store.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("open over a stale record took %s", d)
	}
}

// TestBoltFileHeld: another program holds the bbolt file itself (as the
// bbolt tool would). Reads and writes fail after the timeout with ErrInUse
// rather than hanging.
func TestBoltFileHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	newRun(t, db, "s")
	db.Close()

	c := startHolder(t, "hold-bolt", path)
	res := try(t, "try-ro", path)
	t.Logf("reader: %s", res.Err)
	if !res.InUse || !strings.Contains(res.Err, "is in use by another process") {
		t.Errorf("reader while the file is held: %+v", res)
	}
	res = try(t, "try-rw", path)
	t.Logf("writer: %s", res.Err)
	if !res.InUse || !strings.Contains(res.Err, "locked by a reader's long transaction or another program") {
		t.Errorf("writer while the file is held: %+v", res)
	}
	c.release(t)
	res = try(t, "try-ro", path)
	if res.Err != "" || len(res.Studies) != 1 {
		t.Errorf("reader after release: %+v", res)
	}
}

// TestReadersShare: several read-only DBs (here and in a child) read at
// once; and while a read-only DB is open, a writer opens too (readers hold
// no lock between transactions).
func TestReadersShare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	newRun(t, db, "s")
	db.Close()

	ro, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if res := try(t, "try-ro", path); res.Err != "" {
		t.Errorf("second reader: %+v", res)
	}
	if res := try(t, "try-rw", path); res.Err != "" || len(res.Studies) != 1 {
		t.Errorf("writer while a reader is open: %+v", res)
	}
}

// TestKilledWriterLosesNothing kills a writer with SIGKILL at random
// moments while it moves trials through their states. Every state change
// the writer saw committed is in the store afterwards, and the file passes
// bbolt's consistency check.
func TestKilledWriterLosesNothing(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	path := filepath.Join(t.TempDir(), "b.db")
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=writer-loop", "STORE_PATH="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		if !lines.Scan() || lines.Text() != "ready" {
			t.Fatalf("round %d: writer did not start: %q", round, lines.Text())
		}
		// Let it write for a while, then kill it wherever it is.
		time.AfterFunc(time.Duration(50+37*round)*time.Millisecond, func() { _ = cmd.Process.Kill() })
		committed := map[uint64]store.TrialState{}
		for lines.Scan() {
			var seq uint64
			var st string
			if _, err := fmt.Sscanf(lines.Text(), "%d %s", &seq, &st); err != nil {
				t.Fatalf("round %d: writer said %q", round, lines.Text())
			}
			committed[seq] = store.TrialState(st)
		}
		_ = cmd.Wait()
		if len(committed) == 0 {
			t.Fatalf("round %d: the writer committed nothing before it was killed", round)
		}
		if err := storetest.Check(path); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		ro, err := store.Open(path, &store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		runs, err := ro.Runs(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		trials, err := ro.Trials(ctx, "s", runs[len(runs)-1].ID)
		ro.Close()
		if err != nil {
			t.Fatal(err)
		}
		order := map[store.TrialState]int{}
		for i, s := range store.TrialStates {
			order[s] = i
		}
		for seq, st := range committed {
			if seq > uint64(len(trials)) {
				t.Fatalf("round %d: trial %d was committed as %s but is missing", round, seq, st)
			}
			got := trials[seq-1].State
			if order[got] < order[st] {
				t.Errorf("round %d: trial %d was committed as %s but the store has %s", round, seq, st, got)
			}
		}
		t.Logf("round %d: killed after %d trials", round, len(trials))
	}
}
