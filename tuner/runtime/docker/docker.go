package docker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/owner"
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
	r.owner, _ = owner.Self()
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
