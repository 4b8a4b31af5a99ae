package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/batchtune/batchtune/tuner/runtime"
)

// fatalWaiting are the reasons a container waits for that retrying will
// not cure within a trial: the trial fails with Kubernetes' message.
var fatalWaiting = map[string]bool{
	"ImagePullBackOff":           true,
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
	"PreCreateHookError":         true,
	"PreStartHookError":          true,
}

// Start stops the previous trial's pod and starts a new one with cfg: the
// trial's batching.config in a ConfigMap mounted at ConfigDir, its flags
// after the container's args. It returns once the TF Serving container
// runs, or has already ended (then the Server's Exit says how); it fails
// with Kubernetes' reason when the pod cannot start within PendingTimeout
// (unschedulable, an image that cannot be had, a container that cannot be
// created) or the API refuses it (RBAC). It is StartSlot for slot 0.
func (r *Runtime) Start(ctx context.Context, cfg runtime.Config) (runtime.Server, error) {
	return r.StartSlot(ctx, 0, cfg)
}

// StartSlot is Start for one of the study's parallel slots: it stops that
// slot's previous pod only, and may run while other slots start theirs.
// With Spread "node" the run's trial pods never share a node; cfg.Node
// pins the pod to one node.
func (r *Runtime) StartSlot(ctx context.Context, slot int, cfg runtime.Config) (runtime.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kubernetes: config: %w", err)
	}
	if slot < 0 {
		return nil, fmt.Errorf("kubernetes: slot %d: must not be negative", slot)
	}
	r.mu.Lock()
	if r.lock == nil {
		r.mu.Unlock()
		return nil, runtime.ErrNotRecovered
	}
	prev := r.cur[slot]
	delete(r.cur, slot)
	r.seq++
	seq := r.seq
	r.mu.Unlock()
	if prev != nil {
		if err := prev.Stop(ctx); err != nil {
			return nil, fmt.Errorf("kubernetes: stopping the previous trial: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kubernetes: start: %w", err)
	}
	name := fmt.Sprintf("batchtune-%s-%d-%s", r.namePart, seq, randHex(3))
	cm, pod := r.objects(name, cfg)

	cctx, cancel := r.call(ctx)
	defer cancel()
	if _, err := r.cli.CoreV1().ConfigMaps(r.ns).Create(cctx, cm, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("kubernetes: creating ConfigMap %s/%s: %w", r.ns, name, err)
	}
	created, err := r.cli.CoreV1().Pods(r.ns).Create(cctx, pod, metav1.CreateOptions{})
	if err != nil {
		r.discard(ctx, name, false)
		return nil, fmt.Errorf("kubernetes: creating pod %s/%s: %w", r.ns, name, err)
	}
	began := time.Now()
	s := newServer(r, name, created.UID)
	p, err := s.waitStarted(ctx)
	if err != nil {
		s.discard(ctx)
		return nil, err
	}
	if !s.l.Ended() {
		if err := r.checkRoute(ctx, p.Status.PodIP); err != nil {
			s.discard(ctx)
			return nil, err
		}
	}
	r.mu.Lock()
	if r.lock == nil { // restored while this pod started
		r.mu.Unlock()
		s.discard(ctx)
		return nil, runtime.ErrNotRecovered
	}
	r.cur[slot] = s
	r.mu.Unlock()
	r.log.Info("trial pod started", "pod", name, "slot", slot, "node", p.Spec.NodeName, "ip", p.Status.PodIP,
		"took", time.Since(began).Round(time.Millisecond))
	return s, nil
}

// discard removes a trial's objects after a failed Start.
func (r *Runtime) discard(ctx context.Context, name string, pod bool) {
	if pod {
		if err := r.deletePod(ctx, name, time.Second); err != nil {
			r.log.Warn("removing a failed trial pod", "pod", name, "err", err)
		}
	}
	cctx, cancel := r.cleanupCtx(ctx)
	defer cancel()
	if err := r.cli.CoreV1().ConfigMaps(r.ns).Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("removing a failed trial's ConfigMap", "configmap", name, "err", err)
	}
}

// checkRoute makes sure this host reaches pod IPs: a TCP connection to the
// pod that is accepted or refused proves the route; one that times out or
// finds no route does not. Checked once per runtime.
func (r *Runtime) checkRoute(ctx context.Context, ip string) error {
	if r.routeOnce.Load() {
		return nil
	}
	if ip == "" {
		return fmt.Errorf("%w: the pod has no IP", ErrUnroutable)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(r.grpcPort))
	if err := r.opts.Dial(ctx, addr); err != nil {
		return fmt.Errorf("%w: %s: %v; run batchtune inside the cluster, or on a host where pod IPs route "+
			"(measuring through a port-forward is not supported: it would add its own latency to every request)", ErrUnroutable, addr, err)
	}
	r.routeOnce.Store(true)
	return nil
}

// dialTCP reports nil when addr accepts or refuses a TCP connection.
func dialTCP(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	return err
}

// podEvent is one state of a watched pod; gone when it was deleted.
type podEvent struct {
	pod  *corev1.Pod
	gone bool
	err  error // the API refused the watch (e.g. forbidden)
}

// watchPod follows pod name: its current state, then every change, until
// ctx ends (the channel is then closed). A broken watch is started again
// from a fresh read.
func (r *Runtime) watchPod(ctx context.Context, name string) <-chan podEvent {
	out := make(chan podEvent, 16)
	send := func(e podEvent) bool {
		select {
		case out <- e:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		pods := r.cli.CoreV1().Pods(r.ns)
		for ctx.Err() == nil {
			gctx, cancel := r.call(ctx)
			p, err := pods.Get(gctx, name, metav1.GetOptions{})
			cancel()
			switch {
			case apierrors.IsNotFound(err):
				send(podEvent{gone: true})
				<-ctx.Done()
				return
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
					send(podEvent{err: err})
				}
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			if !send(podEvent{pod: p}) {
				return
			}
			w, err := pods.Watch(ctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
				ResourceVersion: p.ResourceVersion,
			})
			if err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					break // an error event: read afresh
				}
				switch ev.Type {
				case watch.Deleted:
					w.Stop()
					send(podEvent{pod: p, gone: true})
					<-ctx.Done()
					return
				case watch.Added, watch.Modified:
					if !send(podEvent{pod: p}) {
						w.Stop()
						return
					}
				}
			}
			w.Stop()
		}
	}()
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// containerStatus returns the TF Serving container's status in p, if any.
func (r *Runtime) containerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	name := r.tmpl.Spec.Containers[r.ctr].Name
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// pendingReason says why p has not started: the scheduler's message when
// it is unschedulable, else the containers' waiting reasons and the pod's
// conditions that are not met.
func (r *Runtime) pendingReason(p *corev1.Pod) string {
	if p == nil {
		return "no status yet"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return "not scheduled: " + c.Reason + ": " + c.Message
		}
	}
	var why []string
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			why = append(why, fmt.Sprintf("container %s waiting: %s", cs.Name, joinNonEmpty(w.Reason, w.Message)))
		}
	}
	if len(why) == 0 {
		why = append(why, "phase "+string(p.Status.Phase))
		if p.Spec.NodeName != "" {
			why = append(why, "on node "+p.Spec.NodeName)
		}
	}
	return strings.Join(why, "; ")
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ": ")
}
