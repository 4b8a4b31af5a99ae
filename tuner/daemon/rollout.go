package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// rolloutOutputBytes bounds the output kept of a rollout command: its end,
// where the error usually is.
const rolloutOutputBytes = 16 << 10

// RolloutResult is what a study's rollout command did after an accepted
// change.
type RolloutResult struct {
	// Recommendation is the Seq of the recommendation rolled out.
	Recommendation uint64        `json:"recommendation"`
	Argv           []string      `json:"argv"`
	Started        time.Time     `json:"started"`
	Duration       time.Duration `json:"duration_ns"`
	// Result is RolloutOK, RolloutFailed or RolloutTimeout.
	Result string `json:"result"`
	// ExitCode is the command's exit status; -1 when it did not exit on
	// its own (killed, or never started).
	ExitCode int `json:"exit_code"`
	// Output is the end of the command's stdout and stderr, interleaved.
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
}

// runRollout runs argv with path appended as its last argument: no shell,
// in a process group of its own, with env added to the daemon's
// environment, killed (the whole group) after timeout or when ctx ends.
func runRollout(ctx context.Context, argv []string, path string, timeout time.Duration, env []string) RolloutResult {
	args := append(append([]string(nil), argv...), path)
	res := RolloutResult{Argv: args, Started: time.Now().UTC(), ExitCode: -1}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	out := &tailBuffer{max: rolloutOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild holding the output pipes open must not hold us.
	cmd.WaitDelay = 2 * time.Second

	err := cmd.Run()
	res.Duration = time.Since(res.Started)
	res.Output = out.String()
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case err == nil:
		res.Result = RolloutOK
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Result = RolloutTimeout
		res.Error = "killed after the rollout timeout of " + timeout.String()
	default:
		res.Result = RolloutFailed
		res.Error = err.Error()
	}
	return res
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.dropped = true
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := string(b.buf)
	if b.dropped {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		s = "…\n" + s
	}
	return s
}
