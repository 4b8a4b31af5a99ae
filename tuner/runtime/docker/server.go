package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/latch"
)

// reportWait bounds how long Stop waits for the engine to report the exit
// of a container it has stopped or killed.
const reportWait = 30 * time.Second

// server is one trial container.
type server struct {
	rt   *Runtime
	id   string
	name string
	dir  string
	ep   runtime.Endpoints
	l    *latch.Latch

	// watch follows the container until it ends; cancelled once removed.
	watchCtx    context.Context
	cancelWatch context.CancelFunc

	stopping atomic.Bool
	stopMu   sync.Mutex // one Stop at a time
	removed  bool       // under stopMu
}

var _ runtime.Server = (*server)(nil)

func newServer(r *Runtime, id, name, dir string, ep runtime.Endpoints) *server {
	s := &server{rt: r, id: id, name: name, dir: dir, ep: ep, l: latch.New()}
	s.watchCtx, s.cancelWatch = context.WithCancel(context.Background())
	go s.watch()
	return s
}

func (s *server) Endpoints() runtime.Endpoints { return s.ep }
func (s *server) Done() <-chan struct{}        { return s.l.Done() }
func (s *server) Exit() runtime.Exit           { return s.l.Exit() }

// ContainerID returns the container ID of a server this package started,
// for diagnostics and for tests that kill it from outside.
func ContainerID(s runtime.Server) (string, bool) {
	ds, ok := s.(*server)
	if !ok {
		return "", false
	}
	return ds.id, true
}

// watch waits for the container to stop running, then records its exit
// code, the engine's view of why (OOM killer, runtime error) and the tail
// of its log. When the wait's connection breaks, it asks again.
func (s *server) watch() {
	warned := false
	for s.watchCtx.Err() == nil {
		resC, errC := s.rt.cli.ContainerWait(s.watchCtx, s.id, container.WaitConditionNotRunning)
		select {
		case res := <-resC:
			e := runtime.ExitFromCode(int(res.StatusCode))
			if res.Error != nil && res.Error.Message != "" {
				e.Detail = res.Error.Message
			}
			s.ended(e)
			return
		case err := <-errC:
			if s.watchCtx.Err() != nil {
				return
			}
			if errdefs.IsNotFound(err) {
				s.ended(runtime.Exit{Code: -1, Detail: "the container was removed"})
				return
			}
			// The engine went away or dropped the wait: wait again, and
			// say so once.
			if !warned {
				s.rt.log.Warn("waiting on trial container failed; retrying", "container", s.name, "err", err)
				warned = true
			}
			select {
			case <-s.watchCtx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

// ended completes e from the engine and finishes the latch.
func (s *server) ended(e runtime.Exit) {
	ctx, cancel := context.WithTimeout(context.Background(), s.rt.opts.APITimeout)
	defer cancel()
	if info, err := s.rt.cli.ContainerInspect(ctx, s.id); err == nil && info.ContainerJSONBase != nil && info.State != nil {
		e.OOMKilled = info.State.OOMKilled
		if info.State.Error != "" && e.Detail == "" {
			e.Detail = info.State.Error
		}
	}
	e.Log = s.logTail(ctx)
	e.Stopped = s.stopping.Load()
	e.At = time.Now()
	s.l.Finish(e)
	s.rt.log.Info("trial container ended", "container", s.name, "reason", e.Reason())
}

// logTail returns the container's last log lines, stdout and stderr in the
// order they were written.
func (s *server) logTail(ctx context.Context) string {
	rc, err := s.rt.cli.ContainerLogs(ctx, s.id, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(s.rt.opts.TailLines),
	})
	if err != nil {
		return "(log unavailable: " + err.Error() + ")"
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil && len(raw) == 0 {
		return "(log unavailable: " + err.Error() + ")"
	}
	var out bytes.Buffer
	// Without a TTY the engine frames each write with its stream; a TTY
	// container's log is raw.
	if _, err := stdcopy.StdCopy(&out, &out, bytes.NewReader(raw)); err != nil {
		out.Reset()
		out.Write(raw)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if n := s.rt.opts.TailLines; len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops the container (SIGTERM, SIGKILL after the grace period, or
// SIGKILL at once when ctx has ended), waits for the engine to report its
// exit, removes it and the trial's files.
func (s *server) Stop(ctx context.Context) error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.removed {
		return nil
	}
	var errs []error
	if !s.l.Ended() {
		s.stopping.Store(true)
		grace := int(math.Ceil(s.rt.opts.StopGrace.Seconds()))
		sctx, cancel := context.WithTimeout(ctx, s.rt.opts.StopGrace+s.rt.opts.APITimeout)
		err := s.rt.cli.ContainerStop(sctx, s.id, container.StopOptions{Timeout: &grace})
		cancel()
		if client.IsErrConnectionFailed(err) {
			// No engine, no report of the exit to wait for. The container
			// may live on; it is labelled, and the next Recover removes it.
			s.l.Finish(runtime.Exit{Code: -1, Stopped: true, At: time.Now(),
				Detail: "the engine became unreachable; the container's state is unknown"})
			s.cancelWatch()
			return fmt.Errorf("docker: trial container %s: stopping: %w: %w", s.name, ErrEngineUnreachable, err)
		}
		if err != nil && !errdefs.IsNotFound(err) && ctx.Err() == nil {
			errs = append(errs, fmt.Errorf("stopping: %w", err))
		}
	}
	// Removing with force kills what still runs: the path a cancelled
	// ctx takes. It runs on its own bounded context so that a Ctrl-C
	// never leaves the container behind.
	rctx, cancel := s.rt.cleanupCtx(ctx)
	defer cancel()
	if !s.l.Ended() && ctx.Err() != nil {
		if err := s.rt.cli.ContainerKill(rctx, s.id, "KILL"); err != nil && !errdefs.IsNotFound(err) {
			s.rt.log.Warn("killing trial container", "container", s.name, "err", err)
		}
	}
	select {
	case <-s.l.Done():
	case <-time.After(reportWait):
		s.l.Finish(runtime.Exit{Code: -1, Stopped: true, Detail: "the engine did not report the container's exit", At: time.Now()})
	}
	rmErr := s.rt.cli.ContainerRemove(rctx, s.id, container.RemoveOptions{Force: true})
	switch {
	case client.IsErrConnectionFailed(rmErr):
		s.cancelWatch()
		errs = append(errs, fmt.Errorf("removing: %w: %w", ErrEngineUnreachable, rmErr))
	case rmErr != nil && !errdefs.IsNotFound(rmErr):
		errs = append(errs, fmt.Errorf("removing: %w", rmErr))
	default:
		s.removed = true
		s.cancelWatch()
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("docker: trial container %s: %w", s.name, err)
	}
	return nil
}
