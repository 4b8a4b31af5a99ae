package target

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/docker/docker/client"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/process"
)

// Options are what a study does not say: where state lives, how long a
// server gets to stop, the engine client, the logger.
type Options struct {
	// Study names the study's state and labels (a study's name).
	Study string
	// StateDir holds the study's trial files and records; "" for the
	// runtime's default.
	StateDir string
	// StopGrace is the SIGTERM-to-SIGKILL grace; 0 for the runtime's default.
	StopGrace time.Duration
	// DockerClient is the engine client for the docker runtime; nil makes
	// one from the environment (DOCKER_HOST), which the returned runtime's
	// Close releases.
	DockerClient *client.Client
	// Logger receives the runtime's events; nil discards them.
	Logger *slog.Logger
}

// New returns the runtime t names, configured from it. The result may also
// be an io.Closer (the docker runtime is); close it after Restore.
func New(t configs.Target, o Options) (runtime.Runtime, error) {
	switch t.Runtime {
	case configs.RuntimeProcess:
		return process.New(ProcessOptions(t, o))
	case configs.RuntimeDocker:
		return docker.New(DockerOptions(t, o))
	}
	return nil, fmt.Errorf("runtime: target.runtime: want %q or %q, got %q", configs.RuntimeDocker, configs.RuntimeProcess, t.Runtime)
}

// ProcessOptions maps t onto the process runtime's options.
func ProcessOptions(t configs.Target, o Options) process.Options {
	return process.Options{
		Binary:        t.Process.Binary,
		ModelName:     t.Model.Name,
		ModelBasePath: t.Model.BasePath,
		Args:          concat(t.Process.Args, t.Flags),
		Env:           envList(t.Process.Env),
		GRPCPort:      t.Ports.GRPC,
		RESTPort:      t.Ports.REST,
		StateDir:      o.StateDir,
		Study:         o.Study,
		StopGrace:     o.StopGrace,
		Logger:        o.Logger,
	}
}

// DockerOptions maps t onto the docker runtime's options.
func DockerOptions(t configs.Target, o Options) docker.Options {
	d := t.Docker
	opts := docker.Options{
		Client:        o.DockerClient,
		Study:         o.Study,
		StateDir:      o.StateDir,
		Image:         d.Image,
		Existing:      d.Container,
		ModelName:     t.Model.Name,
		ModelBasePath: t.Model.BasePath,
		Env:           envList(d.Env),
		Args:          concat(d.Args, t.Flags),
		GPUs:          d.GPUs,
		Network:       d.Network,
		Pull:          d.Pull,
		GRPCPort:      t.Ports.GRPC,
		RESTPort:      t.Ports.REST,
		StopGrace:     o.StopGrace,
		Logger:        o.Logger,
	}
	if d.ModelDir != "" {
		base := t.Model.BasePath
		if base == "" {
			base = docker.DefaultModelBasePath + "/" + t.Model.Name
		}
		opts.Mounts = []docker.Mount{{Source: d.ModelDir, Target: base}}
	}
	return opts
}

func concat(a, b []string) []string {
	return append(append([]string(nil), a...), b...)
}

// envList turns an environment map into NAME=value entries in name order.
func envList(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]string, 0, len(env))
	for _, k := range names {
		out = append(out, k+"="+env[k])
	}
	return out
}
