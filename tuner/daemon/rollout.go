package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchtune/batchtune/tuner"
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

// rollout runs the study's rollout command after an accepted change and
// records its result beside the recommendation.
func (d *Daemon) rollout(ctx context.Context, j *job, rep *tuner.Report, log *slog.Logger) *RolloutResult {
	sc := j.spec.Schedule
	if len(sc.Rollout) == 0 {
		return nil
	}
	rec := rep.Recommendation
	env := []string{
		"BATCHTUNE_STUDY=" + j.study,
		"BATCHTUNE_RUN=" + strconv.FormatUint(rep.Run.ID, 10),
		"BATCHTUNE_RECOMMENDATION=" + strconv.FormatUint(rec.Seq, 10),
	}
	if fp := j.spec.Export.FlagsPath; fp != "" {
		env = append(env, "BATCHTUNE_FLAGS_FILE="+fp)
	}
	log.Info("rollout starting", "argv", append(append([]string(nil), sc.Rollout...), j.spec.Export.Path), "timeout", sc.RolloutTimeout.D())
	res := runRollout(ctx, sc.Rollout, j.spec.Export.Path, sc.RolloutTimeout.D(), env)
	res.Recommendation = rec.Seq
	d.m.rollouts.WithLabelValues(j.study, res.Result).Inc()
	if res.Result == RolloutOK {
		log.Info("rollout done", "duration", res.Duration, "output", res.Output)
	} else {
		log.Error("rollout failed", "result", res.Result, "exit_code", res.ExitCode, "error", res.Error, "output", res.Output)
	}
	note := fmt.Sprintf("rollout %s (exit %d, %s)", res.Result, res.ExitCode, res.Duration.Round(time.Millisecond))
	if res.Error != "" {
		note += ": " + res.Error
	}
	r := *rec
	if r.Note != "" {
		r.Note += "; "
	}
	r.Note += note
	if err := d.db.PutRecommendation(context.WithoutCancel(ctx), &r); err != nil {
		log.Error("recording the rollout", "err", err)
	}
	return &res
}
