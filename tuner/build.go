package tuner

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/process"
)

// NewRuntime builds the runtime a study's target names. stateDir keeps the
// runtime's per-study files (trial directories, the snapshot of a user's
// container); "" means the runtime's default. The returned runtime has not
// touched anything yet: Tuner.Run calls Recover first.
func NewRuntime(s *configs.Study, stateDir string, log *slog.Logger) (runtime.Runtime, error) {
	t := s.Target
	switch t.Runtime {
	case configs.RuntimeProcess:
		rt, err := process.New(process.Options{
			Binary:        t.Process.Binary,
			ModelName:     t.Model.Name,
			ModelBasePath: t.Model.BasePath,
			Args:          append(slices.Clone(t.Process.Args), t.Flags...),
			Env:           envList(t.Process.Env),
			GRPCPort:      t.Ports.GRPC,
			RESTPort:      t.Ports.REST,
			StateDir:      stateDir,
			Study:         s.Name,
			Logger:        log,
		})
		if err != nil {
			return nil, fmt.Errorf("target.process: %w", err)
		}
		return rt, nil
	case configs.RuntimeDocker:
		d := t.Docker
		var mounts []docker.Mount
		if d.ModelDir != "" {
			mounts = append(mounts, docker.Mount{Source: d.ModelDir, Target: t.Model.BasePath})
		}
		rt, err := docker.New(docker.Options{
			Study:         s.Name,
			StateDir:      stateDir,
			Image:         d.Image,
			Existing:      d.Container,
			ModelName:     t.Model.Name,
			ModelBasePath: t.Model.BasePath,
			Mounts:        mounts,
			Env:           envList(d.Env),
			Args:          append(slices.Clone(t.Flags), d.Args...),
			GPUs:          d.GPUs,
			Network:       d.Network,
			Pull:          d.Pull,
			GRPCPort:      t.Ports.GRPC,
			RESTPort:      t.Ports.REST,
			Logger:        log,
		})
		if err != nil {
			return nil, fmt.Errorf("target.docker: %w", err)
		}
		return rt, nil
	}
	return nil, fmt.Errorf("target.runtime: unknown runtime %q", t.Runtime)
}

// envList turns an env map into KEY=VALUE entries in key order.
func envList(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}
