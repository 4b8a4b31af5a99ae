package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as batchtune in a child process
// (BATCHTUNE_TEST_MAIN=1), with a command that blocks before its action
// when BATCHTUNE_TEST_BLOCK is set: a stand-in for a long read.
func TestMain(m *testing.M) {
	if os.Getenv("BATCHTUNE_TEST_MAIN") == "1" {
		if os.Getenv("BATCHTUNE_TEST_BLOCK") == "1" {
			testHookBeforeAction = func() {
				os.Stdout.WriteString("blocking\n")
				time.Sleep(time.Hour)
			}
		}
		os.Exit(run(append([]string{"batchtune"}, strings.Fields(os.Getenv("BATCHTUNE_TEST_ARGS"))...)))
	}
	os.Exit(m.Run())
}

// TestSIGTERMEndsReadOnlyCommandsAtOnce: the first SIGTERM ends validate,
// trials, status and export wherever they are, with status 128+15.
func TestSIGTERMEndsReadOnlyCommandsAtOnce(t *testing.T) {
	study := t.TempDir() + "/s.yaml"
	os.WriteFile(study, []byte("name: s\n"), 0o644)
	db := t.TempDir() + "/b.db"
	for _, args := range []string{"validate " + study, "trials --db " + db, "status --db " + db, "export --db " + db} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "BATCHTUNE_TEST_MAIN=1", "BATCHTUNE_TEST_BLOCK=1", "BATCHTUNE_TEST_ARGS="+args)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 9)
		if _, err := out.Read(buf); err != nil || string(buf) != "blocking\n" {
			t.Fatalf("%s: child did not reach its action: %q %v", args, buf, err)
		}
		start := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+15 {
				t.Errorf("%s: after SIGTERM: %v, want exit status 143", args, err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%s: took %s to stop", args, d)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%s: still running 10s after SIGTERM", args)
		}
	}
}
