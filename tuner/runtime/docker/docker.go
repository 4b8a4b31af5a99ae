package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/docker/go-connections/nat"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/ports"
	"github.com/batchtune/batchtune/tuner/runtime/internal/statedir"
)

// Labels on every container batchtune creates, so that leftovers can be
// found: `docker ps -a --filter label=io.batchtune.role=trial`.
const (
	LabelStudy = "io.batchtune.study"
	LabelRole  = "io.batchtune.role"
	LabelOwner = "io.batchtune.owner" // pid@host of the batchtune that made it
	RoleTrial  = "trial"
)

// Pull policies.
const (
	PullMissing = "missing" // pull only when the engine lacks the image
	PullAlways  = "always"
	PullNever   = "never"
)

// ConfigDir is where a trial container sees its batching.config and
// monitoring config (a read-only bind mount of the trial's host directory).
const ConfigDir = "/batchtune"

// Defaults for the zero values of Options.
const (
	DefaultModelBasePath = "/models" // TF Serving image's MODEL_BASE_PATH; the model is under it
	DefaultContainerGRPC = 8500
	DefaultContainerREST = 8501
	DefaultHostIP        = "127.0.0.1"
	DefaultStopGrace     = 5 * time.Second
	DefaultEngineTimeout = 10 * time.Second
	DefaultAPITimeout    = 60 * time.Second
	DefaultPullTimeout   = 15 * time.Minute
	DefaultTailLines     = 50
)

// settleWait is how long a fixed port may stay taken after the container
// that held it was stopped.
const settleWait = 5 * time.Second

// Mount is a host directory or file mounted into the trial container.
type Mount struct {
	Source    string // absolute host path
	Target    string // path in the container
	ReadWrite bool   // read-only unless set
}

// Options configure a docker runtime.
type Options struct {
	// Client talks to the engine; nil makes one from the environment
	// (DOCKER_HOST, ...) with API version negotiation, closed by Close.
	Client *client.Client
	// Study names the state directory, the lock, container names and the
	// io.batchtune.study label; default "default".
	Study string
	// StateDir holds the study's trial directories and the snapshot of an
	// existing container; default statedir.Default(). Trial directories
	// are bind-mounted, so it must be a path the engine's host can see
	// (a local engine: any local path).
	StateDir string

	// The trial container's template. Image is required unless Existing
	// is set, in which case the template is the existing container's own
	// configuration and these fields add to it.
	Image string
	// ModelName and ModelBasePath, when ModelName is set, become
	// --model_name and --model_base_path (the path inside the container;
	// default /models/<ModelName>), and MODEL_NAME and MODEL_BASE_PATH (its
	// parent) for an entrypoint like TF Serving's image's, which passes
	// --model_base_path=$MODEL_BASE_PATH/$MODEL_NAME before the arguments.
	// An existing container keeps its own model settings unless
	// ModelBasePath is given.
	ModelName     string
	ModelBasePath string
	// Mounts are bind mounts, e.g. the host's model directory at
	// ModelBasePath.
	Mounts []Mount
	Env    []string
	// Args are the study's extra server flags, after the image's own and
	// before the trial's.
	Args []string
	// GPUs are given to the container as a device request, as docker run
	// --gpus takes them: "" (none), "all", a count, or "device=0,1".
	GPUs string
	// Network is the container's network mode: "" for the engine's default
	// network, a network's name (ports published on HostIP for both), or
	// "host" (the server listens on the host's ports itself).
	Network string
	// Pull says when the image is pulled: PullMissing (the default, as
	// docker run does), PullAlways, or PullNever. Recover pulls.
	Pull string
	// HostIP is where published ports bind and what the endpoints name;
	// default 127.0.0.1.
	HostIP string
	// GRPCPort and RESTPort fix the host ports; 0 lets the engine choose
	// (or, with the host network, picks free ones). An existing container's
	// trials use the ports it publishes instead.
	GRPCPort int
	RESTPort int
	// ContainerGRPCPort and ContainerRESTPort are where the server
	// listens inside the container; default 8500 and 8501.
	ContainerGRPCPort int
	ContainerRESTPort int

	// Existing names a user's container (name or ID) to tune in place: the
	// first Start snapshots its configuration to the state dir and stops
	// it, trials run in containers made from that configuration with the
	// trial's batching flags, and Restore (or the next Recover, after a
	// crash) starts it again, or recreates it from the snapshot if it is
	// gone.
	Existing string

	// StopGrace is how long a container gets between SIGTERM and SIGKILL;
	// default 5s (rounded up to whole seconds, the engine's unit).
	StopGrace time.Duration
	// EngineTimeout bounds the ping Recover makes first; default 10s.
	EngineTimeout time.Duration
	// PullTimeout bounds an image pull; default 15m.
	PullTimeout time.Duration
	// APITimeout bounds each other engine call, so that a hung engine
	// fails a trial instead of stalling it; default 60s.
	APITimeout time.Duration
	// TailLines is how many of the server's last log lines Exit.Log holds;
	// default 50.
	TailLines int
	// Logger receives trial-level events; nil discards them.
	Logger *slog.Logger
}

// Runtime runs each trial's server in a container through the Docker
// Engine API. It implements runtime.Runtime.
type Runtime struct {
	opts      Options
	cli       *client.Client
	ownClient bool
	dir       string // StateDir/Study
	log       *slog.Logger
	owner     string

	mu   sync.Mutex
	lock *statedir.Lock
	cur  *server
	seq  int
	snap *snapshot // the user's container while it is stopped for tuning
	tmpl *template // the trial container's template, once known
}

var _ runtime.Runtime = (*Runtime)(nil)

// New checks opts and fills in the defaults. It makes no engine call:
// Recover, called next, is the first.
func New(opts Options) (*Runtime, error) {
	var errs []string
	if opts.Study == "" {
		opts.Study = statedir.DefaultStudy
	}
	if err := statedir.CheckStudy(opts.Study); err != nil {
		errs = append(errs, "study: "+err.Error())
	}
	if opts.Image == "" && opts.Existing == "" {
		errs = append(errs, "image: required (or name an existing container)")
	}
	if opts.Network == "none" || strings.HasPrefix(opts.Network, "container:") {
		errs = append(errs, fmt.Sprintf("network: %q leaves the server's ports unreachable; want \"\", \"host\" or a network's name", opts.Network))
	}
	if _, err := deviceRequests(opts.GPUs); err != nil {
		errs = append(errs, "gpus: "+err.Error())
	}
	switch opts.Pull {
	case "", PullMissing, PullAlways, PullNever:
	default:
		errs = append(errs, fmt.Sprintf("pull: want %q, %q or %q, got %q", PullMissing, PullAlways, PullNever, opts.Pull))
	}
	if opts.ModelBasePath != "" && !strings.HasPrefix(opts.ModelBasePath, "/") {
		errs = append(errs, fmt.Sprintf("model_base_path: must be an absolute path inside the container, got %q", opts.ModelBasePath))
	}
	if opts.ModelBasePath != "" && opts.ModelName == "" {
		errs = append(errs, "model_base_path: needs model_name")
	}
	for _, p := range []struct {
		name string
		v    int
	}{
		{"grpc_port", opts.GRPCPort}, {"rest_port", opts.RESTPort},
		{"container_grpc_port", opts.ContainerGRPCPort}, {"container_rest_port", opts.ContainerRESTPort},
	} {
		if p.v < 0 || p.v > 65535 {
			errs = append(errs, fmt.Sprintf("%s: must be in 0..65535, got %d", p.name, p.v))
		}
	}
	if opts.GRPCPort != 0 && opts.GRPCPort == opts.RESTPort {
		errs = append(errs, fmt.Sprintf("rest_port: must differ from grpc_port (%d)", opts.GRPCPort))
	}
	for i, m := range opts.Mounts {
		if !filepath.IsAbs(m.Source) {
			errs = append(errs, fmt.Sprintf("mounts[%d].source: must be an absolute host path, got %q", i, m.Source))
		}
		if !strings.HasPrefix(m.Target, "/") {
			errs = append(errs, fmt.Sprintf("mounts[%d].target: must be an absolute container path, got %q", i, m.Target))
		}
	}
	for i, e := range opts.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			errs = append(errs, fmt.Sprintf("env[%d]: want NAME=value, got %q", i, e))
		}
	}
	var reserved []string
	if opts.ModelName != "" {
		reserved = []string{"model_name", "model_base_path"}
	}
	if err := runtime.CheckFlags("args", opts.Args, reserved...); err != nil {
		errs = append(errs, err.Error())
	}
	if opts.StopGrace < 0 {
		errs = append(errs, fmt.Sprintf("stop_grace: must not be negative, got %v", opts.StopGrace))
	}
	if opts.StateDir != "" && !filepath.IsAbs(opts.StateDir) {
		abs, err := filepath.Abs(opts.StateDir)
		if err != nil {
			errs = append(errs, "state_dir: "+err.Error())
		}
		opts.StateDir = abs
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("docker: options:\n  %s", strings.Join(errs, "\n  "))
	}
	if opts.StateDir == "" {
		opts.StateDir = statedir.Default()
	}
	if opts.ModelName != "" && opts.ModelBasePath == "" && opts.Existing == "" {
		opts.ModelBasePath = path.Join(DefaultModelBasePath, opts.ModelName)
	}
	if opts.Pull == "" {
		opts.Pull = PullMissing
	}
	if opts.PullTimeout <= 0 {
		opts.PullTimeout = DefaultPullTimeout
	}
	if opts.HostIP == "" {
		opts.HostIP = DefaultHostIP
	}
	if opts.ContainerGRPCPort == 0 {
		opts.ContainerGRPCPort = DefaultContainerGRPC
	}
	if opts.ContainerRESTPort == 0 {
		opts.ContainerRESTPort = DefaultContainerREST
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.EngineTimeout <= 0 {
		opts.EngineTimeout = DefaultEngineTimeout
	}
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPITimeout
	}
	if opts.TailLines <= 0 {
		opts.TailLines = DefaultTailLines
	}
	r := &Runtime{opts: opts, cli: opts.Client, dir: filepath.Join(opts.StateDir, opts.Study)}
	if r.cli == nil {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("docker: client: %w", err)
		}
		r.cli, r.ownClient = cli, true
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.log = log.With("runtime", "docker", "study", opts.Study)
	host, _ := os.Hostname()
	r.owner = strconv.Itoa(os.Getpid()) + "@" + host
	if opts.Existing == "" {
		r.tmpl = r.imageTemplate()
	}
	return r, nil
}

// Close closes the engine client when New made it. Call it after Restore.
func (r *Runtime) Close() error {
	if r.ownClient {
		return r.cli.Close()
	}
	return nil
}

// apiErr wraps an engine call's error, adding ErrEngineUnreachable when the
// engine could not be reached at all.
func apiErr(what string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("docker: %s: %w: %w", what, ErrEngineUnreachable, err)
	}
	return fmt.Errorf("docker: %s: %w", what, err)
}

// call bounds one engine call.
func (r *Runtime) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.APITimeout)
}

// cleanupCtx is for calls that must run even when the caller's context has
// ended (removing what a failed or cancelled step created); bounded.
func (r *Runtime) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.opts.APITimeout)
}

// Recover pings the engine, claims the study, removes trial containers an
// earlier batchtune left (found by label), puts back a user's container
// that one left stopped (from its snapshot), and checks that what the
// trials need exists (the image, or the existing container).
func (r *Runtime) Recover(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lock != nil {
		return nil
	}
	if err := r.ping(ctx); err != nil {
		return err
	}
	lock, err := statedir.Acquire(r.dir, r.opts.Study)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	if err := r.recover(ctx); err != nil {
		lock.Release()
		return err
	}
	r.lock = lock
	return nil
}

func (r *Runtime) recover(ctx context.Context) error {
	n, err := r.removeTrials(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		r.log.Warn("removed leftover trial containers", "count", n)
	}
	snap, err := r.readSnapshot()
	if err != nil {
		return err
	}
	if snap != nil {
		r.log.Warn("restoring the user's container left stopped by an earlier run", "container", snap.Name, "taken", snap.Taken)
		if err := r.restoreUser(ctx, snap); err != nil {
			return err
		}
	}
	dirs, err := statedir.TrialDirs(r.dir)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("docker: removing leftover %s: %w", d, err)
		}
	}
	if r.opts.Image != "" {
		if err := r.ensureImage(ctx); err != nil {
			return err
		}
	}
	if r.opts.Existing != "" {
		cctx, cancel := r.call(ctx)
		defer cancel()
		if _, err := r.cli.ContainerInspect(cctx, r.opts.Existing); err != nil {
			if errdefs.IsNotFound(err) {
				return fmt.Errorf("%w: %s", ErrContainerNotFound, r.opts.Existing)
			}
			return apiErr("inspecting container "+r.opts.Existing, err)
		}
	}
	return nil
}

func (r *Runtime) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, r.opts.EngineTimeout)
	defer cancel()
	if _, err := r.cli.Ping(pctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker: ping: %w", ctx.Err())
		}
		return fmt.Errorf("%w at %s (within %v; is DOCKER_HOST right and the engine running? .ci/engine-up starts one): %v",
			ErrEngineUnreachable, r.cli.DaemonHost(), r.opts.EngineTimeout, err)
	}
	return nil
}

// ensureImage makes sure the engine has the image, pulling it as the pull
// policy says.
func (r *Runtime) ensureImage(ctx context.Context) error {
	img := r.opts.Image
	if r.opts.Pull != PullAlways {
		cctx, cancel := r.call(ctx)
		_, err := r.cli.ImageInspect(cctx, img)
		cancel()
		switch {
		case err == nil:
			return nil
		case !errdefs.IsNotFound(err):
			return apiErr("inspecting image "+img, err)
		case r.opts.Pull == PullNever:
			return fmt.Errorf("%w: %s (pull policy never: build or pull it first)", ErrImageMissing, img)
		}
	}
	r.log.Info("pulling image", "image", img)
	pctx, cancel := context.WithTimeout(ctx, r.opts.PullTimeout)
	defer cancel()
	rc, err := r.cli.ImagePull(pctx, img, image.PullOptions{})
	if err == nil {
		// The pull happens while its progress is read; an error can come
		// as the last message of the stream.
		err = jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil)
		rc.Close()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: pulling it failed: %v", ErrImageMissing, img, err)
	}
	cctx, cancel2 := r.call(ctx)
	defer cancel2()
	if _, err := r.cli.ImageInspect(cctx, img); err != nil {
		return fmt.Errorf("%w: %s: not there after the pull: %v", ErrImageMissing, img, err)
	}
	return nil
}

// deviceRequests turns a --gpus value into the engine's device request.
func deviceRequests(gpus string) ([]container.DeviceRequest, error) {
	gpu := [][]string{{"gpu"}}
	switch {
	case gpus == "":
		return nil, nil
	case gpus == "all":
		return []container.DeviceRequest{{Count: -1, Capabilities: gpu}}, nil
	case strings.HasPrefix(gpus, "device="):
		ids := strings.Split(strings.TrimPrefix(gpus, "device="), ",")
		for _, id := range ids {
			if id == "" {
				return nil, fmt.Errorf("empty device in %q", gpus)
			}
		}
		return []container.DeviceRequest{{DeviceIDs: ids, Capabilities: gpu}}, nil
	}
	n, err := strconv.Atoi(gpus)
	if err != nil || n < 1 {
		return nil, fmt.Errorf(`want "all", a count or "device=0,1", got %q`, gpus)
	}
	return []container.DeviceRequest{{Count: n, Capabilities: gpu}}, nil
}

// removeTrials force-removes every container labelled as this study's trial.
func (r *Runtime) removeTrials(ctx context.Context) (int, error) {
	cctx, cancel := r.call(ctx)
	defer cancel()
	list, err := r.cli.ContainerList(cctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelStudy+"="+r.opts.Study),
		filters.Arg("label", LabelRole+"="+RoleTrial),
	)})
	if err != nil {
		return 0, apiErr("listing trial containers", err)
	}
	var errs []error
	host, _ := os.Hostname()
	removed := 0
	for _, c := range list {
		// Only a dead batchtune's containers: another live one (a daemon
		// and a one-shot tune of the same study) is mid-trial in its own.
		if gone, why := ownerState(c.Labels[LabelOwner], r.owner, host, pidAlive); !gone {
			errs = append(errs, fmt.Errorf("%w: %s of study %s is %s", ErrTrialInUse, strings.TrimPrefix(firstName(c.Names, c.ID), "/"), r.opts.Study, why))
			continue
		}
		if err := r.cli.ContainerRemove(cctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, apiErr("removing trial container "+c.ID, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// Start stops the previous trial's container and starts a new one from the
// template with cfg: the trial files in a fresh host directory mounted
// read-only at ConfigDir, the flags of Config.Args after the template's.
// In existing-container mode the first Start snapshots and stops the
// user's container.
func (r *Runtime) Start(ctx context.Context, cfg runtime.Config) (runtime.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("docker: config: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lock == nil {
		return nil, runtime.ErrNotRecovered
	}
	// settle: a container was just stopped, and its published ports may
	// take a moment to be released.
	settle := false
	if r.cur != nil {
		err := r.cur.Stop(ctx)
		r.cur = nil
		if err != nil {
			return nil, fmt.Errorf("docker: stopping the previous trial: %w", err)
		}
		settle = true
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("docker: start: %w", err)
	}
	if r.opts.Existing != "" && r.snap == nil {
		if err := r.takeOver(ctx); err != nil {
			return nil, err
		}
		settle = true
	}
	t := r.tmpl
	grpcHost, restHost, err := r.hostPorts(t, settle)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	r.seq++
	dir := filepath.Join(r.dir, "trial-"+strconv.Itoa(r.seq))
	if _, _, err := statedir.TrialFiles(dir, cfg); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	name := fmt.Sprintf("batchtune-%s-trial-%d-%s", r.opts.Study, r.seq, randHex(3))
	config, host, netcfg := t.build(r, cfg, dir, grpcHost, restHost)

	cctx, cancel := r.call(ctx)
	defer cancel()
	created, err := r.cli.ContainerCreate(cctx, config, host, netcfg, nil, name)
	if err != nil {
		r.discard(ctx, name, dir)
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s: %v", ErrImageMissing, config.Image, err)
		}
		return nil, apiErr("creating trial container", err)
	}
	if err := r.cli.ContainerStart(cctx, created.ID, container.StartOptions{}); err != nil {
		r.discard(ctx, created.ID, dir)
		if strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			return nil, fmt.Errorf("docker: starting trial container: %w: %v", runtime.ErrPortInUse, err)
		}
		return nil, apiErr("starting trial container", err)
	}
	ep, err := r.endpoints(cctx, created.ID, t, grpcHost, restHost)
	if err != nil {
		r.discard(ctx, created.ID, dir)
		return nil, err
	}
	s := newServer(r, created.ID, name, dir, ep)
	r.cur = s
	r.log.Info("trial container started", "container", name, "grpc", ep.GRPC, "rest", ep.REST, "dir", dir)
	return s, nil
}

// discard removes a container that failed to become a trial, and its files.
func (r *Runtime) discard(ctx context.Context, idOrName, dir string) {
	cctx, cancel := r.cleanupCtx(ctx)
	defer cancel()
	if err := r.cli.ContainerRemove(cctx, idOrName, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
		r.log.Warn("removing a failed trial container", "container", idOrName, "err", err)
	}
	os.RemoveAll(dir)
}

// hostPorts returns the host ports a trial publishes (or, on the host
// network, listens on): fixed ones after checking they are free (for up to
// settleWait when settle says a container was just stopped), 0 for the
// engine's choice, or free ones on the host network.
func (r *Runtime) hostPorts(t *template, settle bool) (grpcPort, restPort int, err error) {
	grpcPort, restPort = t.hostGRPC, t.hostREST
	bindIP := t.hostIP
	if t.hostNet || bindIP == "0.0.0.0" || bindIP == "::" {
		bindIP = ""
	}
	for _, p := range []struct {
		port int
		what string
	}{{grpcPort, "gRPC"}, {restPort, "REST"}} {
		if p.port == 0 {
			continue
		}
		deadline := time.Now()
		if settle {
			deadline = deadline.Add(settleWait)
		}
		for {
			err = ports.Check(bindIP, p.port, p.what)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if t.hostNet && (grpcPort == 0 || restPort == 0) {
		free, err := ports.Free("", 2)
		if err != nil {
			return 0, 0, err
		}
		if grpcPort == 0 {
			grpcPort = free[0]
			if grpcPort == restPort {
				grpcPort = free[1]
			}
		}
		if restPort == 0 {
			restPort = free[1]
			if restPort == grpcPort {
				restPort = free[0]
			}
		}
	}
	return grpcPort, restPort, nil
}

// endpoints reads back the host ports the engine published.
func (r *Runtime) endpoints(ctx context.Context, id string, t *template, grpcHost, restHost int) (runtime.Endpoints, error) {
	ip := t.hostIP
	if ip == "" || ip == "0.0.0.0" || ip == "::" || t.hostNet {
		ip = DefaultHostIP
	}
	if t.hostNet {
		return runtime.Endpoints{GRPC: hostPort(ip, grpcHost), REST: hostPort(ip, restHost)}, nil
	}
	info, err := r.cli.ContainerInspect(ctx, id)
	if err != nil {
		return runtime.Endpoints{}, apiErr("inspecting trial container", err)
	}
	published := func(cport int) (string, error) {
		if info.NetworkSettings == nil {
			return "", errors.New("no network settings")
		}
		for _, b := range info.NetworkSettings.Ports[nat.Port(strconv.Itoa(cport)+"/tcp")] {
			if b.HostPort != "" {
				return b.HostPort, nil
			}
		}
		return "", fmt.Errorf("container port %d is not published", cport)
	}
	g, err := published(t.grpcPort)
	if err != nil {
		return runtime.Endpoints{}, fmt.Errorf("docker: trial container %s: %w", id, err)
	}
	rp, err := published(t.restPort)
	if err != nil {
		return runtime.Endpoints{}, fmt.Errorf("docker: trial container %s: %w", id, err)
	}
	return runtime.Endpoints{GRPC: ip + ":" + g, REST: ip + ":" + rp}, nil
}

func hostPort(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + strconv.Itoa(port)
	}
	return ip + ":" + strconv.Itoa(port)
}

// Restore stops the trial container, removes every trial container of the
// study, starts (or recreates) the user's container as it was, removes the
// trial files and releases the study. It is idempotent. When the user's
// container cannot be put back, the error wraps ErrRestore and the snapshot
// stays for the next Recover.
func (r *Runtime) Restore(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if r.cur != nil {
		if err := r.cur.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("docker: restore: %w", err))
		}
		r.cur = nil
	}
	if r.lock == nil {
		return errors.Join(errs...)
	}
	if _, err := r.removeTrials(ctx); err != nil {
		errs = append(errs, err)
	}
	snap := r.snap
	if snap == nil {
		var err error
		if snap, err = r.readSnapshot(); err != nil {
			errs = append(errs, err)
		}
	}
	if snap != nil {
		if err := r.restoreUser(ctx, snap); err != nil {
			errs = append(errs, err)
		} else {
			r.snap = nil
		}
	}
	if dirs, err := statedir.TrialDirs(r.dir); err == nil {
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, fmt.Errorf("docker: restore: %w", err))
			}
		}
	}
	if err := r.lock.Release(); err != nil {
		errs = append(errs, fmt.Errorf("docker: restore: %w", err))
	}
	r.lock = nil
	r.snap = nil
	if r.opts.Existing != "" {
		r.tmpl = nil // taken again from the container at the next first Start
	}
	return errors.Join(errs...)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// template is what every trial container of a runtime shares.
type template struct {
	config   container.Config // Cmd without the trial's flags
	host     container.HostConfig
	networks map[string]*network.EndpointSettings
	cmd      []string // the server's arguments before the trial's
	grpcPort int      // in the container
	restPort int
	hostGRPC int // fixed host ports; 0: the engine's (or a free) choice
	hostREST int
	hostIP   string
	hostNet  bool
	sourceID string // the existing container the template was taken from
}

// imageTemplate is the template for a trial container made from an image.
func (r *Runtime) imageTemplate() *template {
	o := r.opts
	devices, _ := deviceRequests(o.GPUs) // checked by New
	t := &template{
		config: container.Config{Image: o.Image},
		host: container.HostConfig{
			NetworkMode: container.NetworkMode(o.Network),
			Resources:   container.Resources{DeviceRequests: devices},
		},
		grpcPort: o.ContainerGRPCPort,
		restPort: o.ContainerRESTPort,
		hostGRPC: o.GRPCPort,
		hostREST: o.RESTPort,
		hostIP:   o.HostIP,
		hostNet:  o.Network == "host",
	}
	t.config.Env, t.cmd = modelSettings(o, nil, nil)
	return t
}

// modelSettings adds the model's environment and flags, when the options
// name a model and its path, to env and cmd.
func modelSettings(o Options, env, cmd []string) ([]string, []string) {
	if o.ModelName == "" || o.ModelBasePath == "" {
		return env, cmd
	}
	env = append(env, "MODEL_NAME="+o.ModelName, "MODEL_BASE_PATH="+path.Dir(o.ModelBasePath))
	cmd = append(cmd, "--model_name="+o.ModelName, "--model_base_path="+o.ModelBasePath)
	return env, cmd
}

// build makes one trial container's configuration.
func (t *template) build(r *Runtime, cfg runtime.Config, dir string, grpcHost, restHost int) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	o := r.opts
	c := t.config
	grpcIn, restIn := t.grpcPort, t.restPort
	if t.hostNet {
		grpcIn, restIn = grpcHost, restHost
	}
	c.Env = append(append([]string(nil), c.Env...), o.Env...)
	c.Cmd = append([]string(nil), t.cmd...)
	c.Cmd = append(c.Cmd, "--port="+strconv.Itoa(grpcIn), "--rest_api_port="+strconv.Itoa(restIn))
	c.Cmd = append(c.Cmd, o.Args...)
	c.Cmd = append(c.Cmd, cfg.Args(ConfigDir+"/"+runtime.BatchingFile, ConfigDir+"/"+runtime.MonitoringFile)...)
	c.Labels = map[string]string{LabelStudy: o.Study, LabelRole: RoleTrial, LabelOwner: r.owner}
	c.Hostname = ""

	h := t.host
	h.AutoRemove = false
	h.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyDisabled}
	h.Mounts = append([]mount.Mount(nil), h.Mounts...)
	for _, m := range o.Mounts {
		h.Mounts = append(h.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: !m.ReadWrite})
	}
	h.Mounts = append(h.Mounts, mount.Mount{Type: mount.TypeBind, Source: dir, Target: ConfigDir, ReadOnly: true})
	if !t.hostNet {
		c.ExposedPorts = nat.PortSet{}
		for p := range t.config.ExposedPorts {
			c.ExposedPorts[p] = struct{}{}
		}
		h.PortBindings = nat.PortMap{}
		for p, b := range t.host.PortBindings {
			h.PortBindings[p] = append([]nat.PortBinding(nil), b...)
		}
		publish := func(cport, hport int) {
			p := nat.Port(strconv.Itoa(cport) + "/tcp")
			c.ExposedPorts[p] = struct{}{}
			if hport != 0 && len(h.PortBindings[p]) > 0 {
				return // the existing container's own binding, kept
			}
			hp := ""
			if hport != 0 {
				hp = strconv.Itoa(hport)
			}
			h.PortBindings[p] = []nat.PortBinding{{HostIP: t.hostIP, HostPort: hp}}
		}
		publish(t.grpcPort, grpcHost)
		publish(t.restPort, restHost)
	}
	var netcfg *network.NetworkingConfig
	if len(t.networks) > 0 {
		netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{}}
		for name, es := range t.networks {
			netcfg.EndpointsConfig[name] = endpointConfig(es, t.sourceID)
		}
	}
	return &c, &h, netcfg
}

// endpointConfig keeps the configured part of an endpoint of container id
// (aliases, links, a static address), not what the engine filled in for the
// running one: its addresses, and the alias it adds itself, the short ID.
func endpointConfig(es *network.EndpointSettings, id string) *network.EndpointSettings {
	if es == nil {
		return &network.EndpointSettings{}
	}
	var aliases []string
	for _, a := range es.Aliases {
		if len(a) >= 12 && strings.HasPrefix(id, a) {
			continue
		}
		aliases = append(aliases, a)
	}
	return &network.EndpointSettings{
		IPAMConfig: es.IPAMConfig,
		Links:      es.Links,
		Aliases:    aliases,
		DriverOpts: es.DriverOpts,
		GwPriority: es.GwPriority,
	}
}
