package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/latch"
)

// reportWait bounds how long Stop waits, past the grace period, for
// Kubernetes to report the end of a pod it deletes.
const reportWait = 30 * time.Second

// server is one trial pod.
type server struct {
	rt   *Runtime
	name string
	uid  types.UID
	l    *latch.Latch

	mu   sync.Mutex
	ep   runtime.Endpoints
	node string
	last *corev1.Pod // the latest state seen

	events   <-chan podEvent
	watchCtx context.Context
	cancel   context.CancelFunc
	stopping atomic.Bool
	stopMu   sync.Mutex
	removed  bool // under stopMu
}

var (
	_ runtime.Server = (*server)(nil)
	_ runtime.Placed = (*server)(nil)
)

func newServer(r *Runtime, name string, uid types.UID) *server {
	s := &server{rt: r, name: name, uid: uid, l: latch.New()}
	s.watchCtx, s.cancel = context.WithCancel(context.Background())
	s.events = r.watchPod(s.watchCtx, name)
	return s
}

func (s *server) Endpoints() runtime.Endpoints {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ep
}
func (s *server) Done() <-chan struct{} { return s.l.Done() }

// Node is the node the pod was scheduled to (runtime.Placed).
func (s *server) Node() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}
func (s *server) Exit() runtime.Exit { return s.l.Exit() }

// PodName returns the pod of a server this package started, and its node,
// for diagnostics and for tests that act on it from outside.
func PodName(srv runtime.Server) (name, node string, ok bool) {
	s, ok := srv.(*server)
	if !ok {
		return "", "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name, s.node, true
}

// waitStarted follows the pod until its TF Serving container runs (or has
// ended: the latch then holds its Exit), and fails with Kubernetes' reason
// when it cannot start or is still pending after PendingTimeout. On
// success the watch goes on in the background until the server ends.
func (s *server) waitStarted(ctx context.Context) (*corev1.Pod, error) {
	r := s.rt
	deadline := time.NewTimer(r.opts.PendingTimeout)
	defer deadline.Stop()
	var last *corev1.Pod
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kubernetes: pod %s: waiting for it to start: %w", s.name, ctx.Err())
		case <-deadline.C:
			return nil, fmt.Errorf("kubernetes: pod %s still not running after %v (pending_timeout): %s", s.name, r.opts.PendingTimeout, r.pendingReason(last))
		case ev, ok := <-s.events:
			if !ok {
				return nil, fmt.Errorf("kubernetes: pod %s: watch ended", s.name)
			}
			if ev.err != nil {
				return nil, fmt.Errorf("kubernetes: pod %s: %w", s.name, ev.err)
			}
			if ev.gone {
				return nil, fmt.Errorf("kubernetes: pod %s was deleted before it started (by someone else)", s.name)
			}
			p := ev.pod
			if p.UID != s.uid {
				continue
			}
			last = p
			s.seen(p)
			cs := r.containerStatus(p)
			if cs != nil && cs.State.Waiting != nil && fatalWaiting[cs.State.Waiting.Reason] {
				w := cs.State.Waiting
				return nil, fmt.Errorf("kubernetes: pod %s: container %s: %s", s.name, cs.Name, joinNonEmpty(w.Reason, w.Message))
			}
			for _, ics := range p.Status.InitContainerStatuses {
				if w := ics.State.Waiting; w != nil && fatalWaiting[w.Reason] {
					return nil, fmt.Errorf("kubernetes: pod %s: init container %s: %s", s.name, ics.Name, joinNonEmpty(w.Reason, w.Message))
				}
			}
			if e, ended := s.exitOf(p); ended {
				s.finish(e)
				go s.watch()
				return p, nil
			}
			if cs != nil && cs.State.Running != nil && p.Status.PodIP != "" {
				go s.watch()
				return p, nil
			}
		}
	}
}

// seen records p's IP (the endpoints) and node once known.
func (s *server) seen(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = p
	if s.ep.GRPC == "" && p.Status.PodIP != "" {
		s.ep = runtime.Endpoints{
			GRPC: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(s.rt.grpcPort)),
			REST: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(s.rt.restPort)),
		}
	}
	if p.Spec.NodeName != "" {
		s.node = p.Spec.NodeName
	}
}

// exitOf says whether p's TF Serving container has ended, and how.
func (s *server) exitOf(p *corev1.Pod) (runtime.Exit, bool) {
	cs := s.rt.containerStatus(p)
	if cs != nil {
		if t := cs.State.Terminated; t != nil {
			e := runtime.ExitFromCode(int(t.ExitCode))
			e.OOMKilled = t.Reason == "OOMKilled"
			switch t.Reason {
			case "", "Error", "Completed":
				e.Detail = t.Message
			default:
				e.Detail = joinNonEmpty(t.Reason, t.Message)
			}
			return e, true
		}
		if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return runtime.Exit{Code: -1, Detail: joinNonEmpty(w.Reason, w.Message)}, true
		}
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return runtime.Exit{Code: -1, Detail: joinNonEmpty("pod "+string(p.Status.Phase), p.Status.Reason, p.Status.Message)}, true
	}
	return runtime.Exit{}, false
}

// watch follows the running pod until its container ends or it is gone.
func (s *server) watch() {
	for ev := range s.events {
		if s.l.Ended() {
			continue // drain until the watch is cancelled
		}
		if ev.pod != nil && ev.pod.UID == s.uid {
			s.seen(ev.pod)
			if e, ended := s.exitOf(ev.pod); ended {
				s.finish(e)
				continue
			}
		}
		if ev.gone {
			e := runtime.Exit{Code: -1, Detail: "the pod was deleted"}
			if s.stopping.Load() {
				e.Detail = ""
			}
			s.finish(e)
		}
	}
}

// finish completes e with the log's tail and who stopped it, and ends the
// server.
func (s *server) finish(e runtime.Exit) {
	if s.l.Ended() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.rt.opts.APITimeout)
	defer cancel()
	e.Log = s.logTail(ctx)
	e.Stopped = s.stopping.Load()
	e.At = time.Now()
	s.l.Finish(e)
	s.rt.log.Info("trial pod ended", "pod", s.name, "reason", e.Reason())
}

// logTail returns the TF Serving container's last log lines.
func (s *server) logTail(ctx context.Context) string {
	n := int64(s.rt.opts.TailLines)
	limit := int64(1 << 20)
	req := s.rt.cli.CoreV1().Pods(s.rt.ns).GetLogs(s.name, &corev1.PodLogOptions{
		Container: s.rt.tmpl.Spec.Containers[s.rt.ctr].Name, TailLines: &n, LimitBytes: &limit,
	})
	rc, err := req.Stream(ctx)
	if err != nil {
		return "(log unavailable: " + err.Error() + ")"
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil && len(b) == 0 {
		return "(log unavailable: " + err.Error() + ")"
	}
	return strings.TrimRight(string(b), "\n")
}

// Stop deletes the pod (SIGTERM, SIGKILL after the grace period; at once
// when ctx has ended), waits for Kubernetes to report the container's end
// and the pod to be gone, and removes the trial's ConfigMap.
func (s *server) Stop(ctx context.Context) error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.removed {
		return nil
	}
	r := s.rt
	if !s.l.Ended() {
		s.stopping.Store(true)
	}
	grace := r.opts.StopGrace
	if ctx.Err() != nil {
		grace = time.Second
	}
	secs := int64((grace + time.Second - 1) / time.Second)
	cctx, cancel := r.cleanupCtx(ctx)
	defer cancel()
	var errs []string
	err := r.cli.CoreV1().Pods(r.ns).Delete(cctx, s.name, metav1.DeleteOptions{
		GracePeriodSeconds: &secs, Preconditions: &metav1.Preconditions{UID: &s.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		errs = append(errs, "deleting: "+err.Error())
	}
	select {
	case <-s.l.Done():
	case <-time.After(grace + reportWait):
		s.l.Finish(runtime.Exit{Code: -1, Stopped: true, At: time.Now(), Detail: "Kubernetes did not report the pod's end"})
	}
	if err := r.deletePod(ctx, s.name, grace); err != nil {
		errs = append(errs, err.Error())
	}
	s.cancel()
	if err := r.cli.CoreV1().ConfigMaps(r.ns).Delete(cctx, s.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, "removing its ConfigMap: "+err.Error())
	}
	if len(errs) == 0 {
		s.removed = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubernetes: trial pod %s: %s", s.name, strings.Join(errs, "; "))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// discard removes a pod that failed to become a trial, and its ConfigMap.
func (s *server) discard(ctx context.Context) {
	s.stopping.Store(true)
	s.rt.discard(ctx, s.name, true)
	s.cancel()
}
