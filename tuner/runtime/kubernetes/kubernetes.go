package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/owner"
	"github.com/batchtune/batchtune/tuner/runtime/internal/statedir"
)

// Labels and the annotation on every object batchtune creates, so that
// leftovers can be found: kubectl get pods -l batchtune.io/role=trial.
const (
	LabelStudy      = "batchtune.io/study"
	LabelRun        = "batchtune.io/run"
	LabelRole       = "batchtune.io/role"
	AnnotationOwner = "batchtune.io/owner" // pid@host, or pod/namespace/name/uid, of the batchtune that made it
	AnnotationStudy = "batchtune.io/study" // the study's name as given
	RoleTrial       = "trial"
)

// Values of Options.Spread.
const (
	SpreadNode = "node"
	SpreadNone = "none"
)

// ConfigDir is where the trial's ConfigMap is mounted in the TF Serving
// container; configVolume is the volume's name in the pod.
const (
	ConfigDir    = "/batchtune"
	configVolume = "batchtune-trial-config"
)

// Defaults for the zero values of Options.
const (
	DefaultContainer      = "tfserving"
	DefaultModelBasePath  = "/models"
	DefaultGRPCPort       = 8500
	DefaultRESTPort       = 8501
	DefaultPendingTimeout = 5 * time.Minute
	DefaultStopGrace      = 5 * time.Second
	DefaultAPITimeout     = 30 * time.Second
	DefaultTailLines      = 50
)

// ErrUnroutable is returned by Start when the pod's IP cannot be reached
// from this host.
var ErrUnroutable = errors.New("kubernetes: pod IPs do not route from here")

// Options configure a kubernetes runtime.
type Options struct {
	// Client talks to the cluster; nil makes one from Kubeconfig (or
	// $KUBECONFIG, ~/.kube/config, or in-cluster config) and Context.
	Client     kubernetes.Interface
	Kubeconfig string
	Context    string
	// Namespace holds the trial pods; default: the template's, then the
	// kubeconfig context's, then "default".
	Namespace string

	// Study names the state (its lock) and the batchtune.io/study label;
	// default "default". StateDir holds the lock; default statedir.Default().
	Study    string
	StateDir string

	// Template is the trial pod (its metadata and spec). Image, when
	// set, replaces the TF Serving container's image; with no Template,
	// the pod is that image alone.
	Template *corev1.PodTemplateSpec
	Image    string
	// Container names the TF Serving container: default the template's
	// only container, or the one named "tfserving".
	Container string
	// ModelName and ModelBasePath, when ModelName is set, become
	// --model_name and --model_base_path (default /models/<ModelName>),
	// and MODEL_NAME and MODEL_BASE_PATH (its parent) for an entrypoint
	// like TF Serving's image's.
	ModelName     string
	ModelBasePath string
	// Args are the study's extra server flags, after the container's own
	// args and before the trial's.
	Args []string
	// GRPCPort and RESTPort are where the server listens in the pod:
	// default the container's ports named grpc and rest (or http), else
	// 8500 and 8501.
	GRPCPort int
	RESTPort int

	// Spread says how parallel trial pods of one run are kept apart:
	// SpreadNode (the default) never puts two on one node (a required pod
	// anti-affinity); SpreadNone lets the scheduler place them by their
	// resource requests (each its own GPU, say).
	Spread string

	// PendingTimeout bounds how long a trial's container may take to start
	// (scheduling, image, volumes); default 5m.
	PendingTimeout time.Duration
	// StopGrace is the pod's termination grace period; default 5s.
	StopGrace time.Duration
	// APITimeout bounds each API call; default 30s.
	APITimeout time.Duration
	// TailLines is how many of the server's last log lines Exit.Log
	// holds; default 50.
	TailLines int
	// Logger receives trial-level events; nil discards them.
	Logger *slog.Logger

	// Dial checks that this host reaches a pod IP (tests replace it); nil
	// dials TCP.
	Dial func(ctx context.Context, addr string) error
}

// Runtime runs each trial's server in a pod. It implements runtime.Runtime.
type Runtime struct {
	opts      Options
	cli       kubernetes.Interface
	ns        string
	tmpl      *corev1.PodTemplateSpec // with the TF Serving container at index ctr
	ctr       int
	grpcPort  int
	restPort  int
	dir       string
	log       *slog.Logger
	owner     string      // pid@host, or pod/namespace/name/uid in a pod
	run       string      // this runtime's batchtune.io/run value
	studyVal  string      // the study as a label value
	namePart  string      // the study as part of an object name
	routeOnce atomic.Bool // pod IPs were seen to route

	mu   sync.Mutex
	lock *statedir.Lock
	cur  map[int]*server // each slot's running trial pod
	seq  int
}

var _ runtime.Concurrent = (*Runtime)(nil)

// New checks opts, fills in the defaults and makes the client. It makes no
// API call: Recover, called next, is the first.
func New(opts Options) (*Runtime, error) {
	var errs []string
	if opts.Study == "" {
		opts.Study = statedir.DefaultStudy
	}
	if err := statedir.CheckStudy(opts.Study); err != nil {
		errs = append(errs, "study: "+err.Error())
	}
	if opts.Template == nil && opts.Image == "" {
		errs = append(errs, "template: required (or give an image)")
	}
	if opts.ModelBasePath != "" && !strings.HasPrefix(opts.ModelBasePath, "/") {
		errs = append(errs, fmt.Sprintf("model_base_path: must be an absolute path inside the container, got %q", opts.ModelBasePath))
	}
	var reserved []string
	if opts.ModelName != "" {
		reserved = []string{"model_name", "model_base_path"}
	}
	if err := runtime.CheckFlags("args", opts.Args, reserved...); err != nil {
		errs = append(errs, err.Error())
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"grpc_port", opts.GRPCPort}, {"rest_port", opts.RESTPort}} {
		if p.v < 0 || p.v > 65535 {
			errs = append(errs, fmt.Sprintf("%s: must be in 0..65535, got %d", p.name, p.v))
		}
	}
	if opts.PendingTimeout < 0 || opts.StopGrace < 0 {
		errs = append(errs, "pending_timeout, stop_grace: must not be negative")
	}
	if opts.StateDir != "" && !filepath.IsAbs(opts.StateDir) {
		if abs, err := filepath.Abs(opts.StateDir); err == nil {
			opts.StateDir = abs
		}
	}
	switch opts.Spread {
	case "":
		opts.Spread = SpreadNode
	case SpreadNode, SpreadNone:
	default:
		errs = append(errs, fmt.Sprintf("spread: want %q or %q, got %q", SpreadNode, SpreadNone, opts.Spread))
	}
	r := &Runtime{cur: map[int]*server{}}
	if len(errs) == 0 {
		tmpl, ctr, err := trialTemplate(opts)
		if err != nil {
			errs = append(errs, err.Error())
		}
		r.tmpl, r.ctr = tmpl, ctr
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("kubernetes: options:\n  %s", strings.Join(errs, "\n  "))
	}
	if opts.StateDir == "" {
		opts.StateDir = statedir.Default()
	}
	if opts.ModelName != "" && opts.ModelBasePath == "" {
		opts.ModelBasePath = DefaultModelBasePath + "/" + opts.ModelName
	}
	if opts.PendingTimeout == 0 {
		opts.PendingTimeout = DefaultPendingTimeout
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPITimeout
	}
	if opts.TailLines <= 0 {
		opts.TailLines = DefaultTailLines
	}
	if opts.Dial == nil {
		opts.Dial = dialTCP
	}
	r.opts = opts
	r.grpcPort, r.restPort = containerPorts(&r.tmpl.Spec.Containers[r.ctr], opts.GRPCPort, opts.RESTPort)
	r.cli = opts.Client
	ns := opts.Namespace
	if ns == "" {
		ns = r.tmpl.Namespace
	}
	switch {
	case r.cli == nil:
		cli, cns, err := Client(opts.Kubeconfig, opts.Context)
		if err != nil {
			return nil, err
		}
		r.cli = cli
		if ns == "" {
			ns = cns
		}
	case ns == "":
		_, ns = clientConfig(opts.Kubeconfig, opts.Context)
	}
	r.ns = ns
	r.tmpl.Namespace = ns
	r.dir = filepath.Join(opts.StateDir, opts.Study)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.log = log.With("runtime", "kubernetes", "study", opts.Study, "namespace", ns)
	r.owner, _ = owner.Self()
	if p, ok := owner.SelfPod(); ok {
		r.owner = p.Label()
	}
	r.run = randHex(5)
	r.studyVal = labelValue(opts.Study)
	r.namePart = namePart(opts.Study)
	return r, nil
}

// Client makes a client from a kubeconfig file (empty: $KUBECONFIG,
// ~/.kube/config, or the in-cluster configuration) and context (empty: the
// current one), and returns the context's namespace ("default" when it
// names none).
func Client(kubeconfig, kcontext string) (kubernetes.Interface, string, error) {
	cc, ns := clientConfig(kubeconfig, kcontext)
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: kubeconfig: %w", err)
	}
	cli, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: client: %w", err)
	}
	return cli, ns, nil
}

// clientConfig loads the kubeconfig lazily and reads its context's
// namespace ("default" when there is none, or no kubeconfig).
func clientConfig(kubeconfig, kcontext string) (clientcmd.ClientConfig, string) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kcontext})
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = metav1.NamespaceDefault
	}
	return cc, ns
}

// Namespace is where the trial pods are made.
func (r *Runtime) Namespace() string { return r.ns }

// Selector selects every object of this runtime's study.
func (r *Runtime) Selector() string {
	return labels.Set{LabelStudy: r.studyVal, LabelRole: RoleTrial}.String()
}

// call bounds one API call.
func (r *Runtime) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.APITimeout)
}

// cleanupCtx is for calls that must run even when the caller's context has
// ended (removing what a failed or cancelled step created); bounded.
func (r *Runtime) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.opts.APITimeout+r.opts.StopGrace)
}

// Recover claims the study's state directory, then removes the pods and
// ConfigMaps of the study that a batchtune which is gone left behind. It
// fails with runtime.ErrBusy when another live batchtune holds the study,
// here or (by its pods) on another host, and with the API's message when
// the namespace may not be read.
func (r *Runtime) Recover(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lock != nil {
		return nil
	}
	lock, err := statedir.Acquire(r.dir, r.opts.Study)
	if err != nil {
		return err
	}
	if err := r.sweep(ctx, false); err != nil {
		lock.Release()
		return err
	}
	r.lock = lock
	return nil
}

// sweep removes the study's pods and ConfigMaps whose owner is gone (or,
// with mine, those of this runtime's own run). Objects of a live batchtune
// are left alone and reported with runtime.ErrBusy.
func (r *Runtime) sweep(ctx context.Context, mine bool) error {
	cctx, cancel := r.call(ctx)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: r.Selector()}
	pods, err := r.cli.CoreV1().Pods(r.ns).List(cctx, sel)
	if err != nil {
		return fmt.Errorf("kubernetes: listing trial pods in namespace %s: %w", r.ns, err)
	}
	cms, err := r.cli.CoreV1().ConfigMaps(r.ns).List(cctx, sel)
	if err != nil {
		return fmt.Errorf("kubernetes: listing trial ConfigMaps in namespace %s: %w", r.ns, err)
	}
	host, _ := os.Hostname()
	gone := r.ownerGone(cctx, host)
	var busy []string
	var gonePods []string
	for _, p := range pods.Items {
		if mine && p.Labels[LabelRun] != r.run {
			continue
		}
		if gone, why := gone(p.Annotations[AnnotationOwner]); !gone {
			busy = append(busy, "pod "+p.Name+" "+why)
			continue
		}
		gonePods = append(gonePods, p.Name)
	}
	if len(busy) > 0 {
		return fmt.Errorf("%w: study %q in namespace %s: %s", runtime.ErrBusy, r.opts.Study, r.ns, strings.Join(busy, "; "))
	}
	var errs []error
	for _, name := range gonePods {
		r.log.Info("removing a trial pod left behind", "pod", name)
		if err := r.deletePod(ctx, name, 0); err != nil {
			errs = append(errs, err)
		}
	}
	for _, cm := range cms.Items {
		if mine && cm.Labels[LabelRun] != r.run {
			continue
		}
		if gone, _ := gone(cm.Annotations[AnnotationOwner]); !gone {
			continue
		}
		if err := r.cli.CoreV1().ConfigMaps(r.ns).Delete(cctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("kubernetes: removing ConfigMap %s: %w", cm.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Restore stops the current trial's pod, removes whatever this runtime
// still has in the cluster and releases the study. Idempotent.
func (r *Runtime) Restore(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for slot, s := range r.cur {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		delete(r.cur, slot)
	}
	if r.lock != nil {
		if err := r.sweep(ctx, true); err != nil {
			errs = append(errs, err)
		}
		if err := r.lock.Release(); err != nil {
			errs = append(errs, err)
		}
		r.lock = nil
	}
	return errors.Join(errs...)
}

// deletePod deletes a pod with the given grace period (0: the runtime's
// stop grace) and waits until the API no longer has it, bounded.
func (r *Runtime) deletePod(ctx context.Context, name string, grace time.Duration) error {
	if grace <= 0 {
		grace = r.opts.StopGrace
	}
	secs := int64((grace + time.Second - 1) / time.Second)
	cctx, cancel := r.cleanupCtx(ctx)
	defer cancel()
	err := r.cli.CoreV1().Pods(r.ns).Delete(cctx, name, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes: deleting pod %s: %w", name, err)
	}
	for {
		_, err := r.cli.CoreV1().Pods(r.ns).Get(cctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("kubernetes: pod %s still there %v after its deletion: %w", name, r.opts.APITimeout+grace, cctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ownerGone returns a function that says whether the batchtune named by
// an owner annotation (pid@host, or pod/namespace/name/uid looked up
// through the API, once per owner) is gone, so that its objects may be
// removed (the rule is package owner's); the text names a live owner and
// what to do.
func (r *Runtime) ownerGone(ctx context.Context, host string) func(label string) (bool, string) {
	return ownerGone(ctx, r.cli, r.owner, host)
}

// ownerGone is Runtime.ownerGone for the batchtune self (its owner label)
// on host, asking cli about pod owners.
func ownerGone(ctx context.Context, cli kubernetes.Interface, self, host string) func(label string) (bool, string) {
	type answer struct {
		st  owner.PodState
		err error
	}
	seen := map[string]answer{}
	lookup := func(ns, name string) (owner.PodState, error) {
		key := ns + "/" + name
		if a, ok := seen[key]; ok {
			return a.st, a.err
		}
		var a answer
		p, err := cli.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			a.err = err
		default:
			a.st = owner.PodState{Exists: true, UID: string(p.UID), Phase: string(p.Status.Phase)}
			if p.DeletionTimestamp != nil {
				a.st.DeleteBy = p.DeletionTimestamp.Time
			}
		}
		seen[key] = a
		return a.st, a.err
	}
	now := time.Now()
	return func(label string) (bool, string) {
		v := owner.CheckAny(label, self, host, owner.PIDAlive, lookup, now)
		switch {
		case v.Gone:
			return true, ""
		case v.Unchecked != "":
			return false, "is owned by " + v.String() + ": let this batchtune get pods in that namespace, or delete the pod"
		case v.Pod != "":
			return false, "is owned by the batchtune in the live " + v.String() + ": stop it, or delete the pod"
		case v.Remote:
			return false, "is owned by " + v.String() + ": stop that batchtune, or delete the pod"
		}
		return false, "is owned by the live " + v.String()
	}
}

var labelOK = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// labelValue returns s when it is a valid label value, else a hash of it.
func labelValue(s string) string {
	if labelOK.MatchString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(sum[:12])
}

// namePart turns a study name into a DNS-label piece of at most 30 chars.
func namePart(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 30 {
		out = strings.TrimRight(out[:30], "-")
	}
	if out == "" {
		out = "study"
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
