package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/batchtune/batchtune/tuner/runtime"
)

// maxBatchingFile bounds what Production reads as a batching.config.
const maxBatchingFile = 1 << 20

// Production is what the user's existing container serves with: the
// tuner's baseline. Args are the container's command (after the image's
// entrypoint); Batching and BatchingPath are read from inside it.
type Production = runtime.Production

// InPlace names the user's container this runtime tunes in place (as the
// study names it), or "" when it runs an image of its own.
func (r *Runtime) InPlace() string { return r.opts.Existing }

// Production reads the configuration the existing container runs with,
// from the engine (its arguments) and from the container's file system
// (the batching.config those arguments name), without changing anything.
// It works before or after the first Start (the container may be stopped).
func (r *Runtime) Production(ctx context.Context) (Production, error) {
	if r.opts.Existing == "" {
		return Production{}, errors.New("docker: Production: no existing container in this study")
	}
	cctx, cancel := r.call(ctx)
	defer cancel()
	id := r.opts.Existing
	if r.snap != nil {
		id = r.snap.ID
	}
	info, err := r.cli.ContainerInspect(cctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return Production{}, fmt.Errorf("%w: %s", ErrContainerNotFound, id)
		}
		return Production{}, apiErr("inspecting "+id, err)
	}
	if info.Config == nil {
		return Production{}, fmt.Errorf("docker: inspecting %s: no configuration in the answer", id)
	}
	p := Production{Args: append([]string(nil), info.Config.Cmd...)}
	enabled := false
	for _, a := range p.Args {
		name, ok := runtime.FlagName(a)
		if !ok {
			continue
		}
		_, v, hasValue := strings.Cut(a, "=")
		switch name {
		case "enable_batching":
			enabled = !hasValue || v == "true" || v == "1"
		case "batching_parameters_file":
			p.BatchingPath = v
		}
	}
	if !enabled || p.BatchingPath == "" {
		p.BatchingPath = ""
		return p, nil
	}
	if !path.IsAbs(p.BatchingPath) {
		wd := info.Config.WorkingDir
		if wd == "" {
			wd = "/"
		}
		p.BatchingPath = path.Join(wd, p.BatchingPath)
	}
	rc, _, err := r.cli.CopyFromContainer(cctx, info.ID, p.BatchingPath)
	if err != nil {
		return Production{}, fmt.Errorf("docker: reading %s from container %s: %w", p.BatchingPath, strings.TrimPrefix(info.Name, "/"), err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		return Production{}, fmt.Errorf("docker: reading %s from container %s: %w", p.BatchingPath, strings.TrimPrefix(info.Name, "/"), err)
	}
	if h.Typeflag != tar.TypeReg {
		return Production{}, fmt.Errorf("docker: %s in container %s is not a regular file", p.BatchingPath, strings.TrimPrefix(info.Name, "/"))
	}
	data, err := io.ReadAll(io.LimitReader(tr, maxBatchingFile+1))
	if err != nil {
		return Production{}, fmt.Errorf("docker: reading %s from container %s: %w", p.BatchingPath, strings.TrimPrefix(info.Name, "/"), err)
	}
	if len(data) > maxBatchingFile {
		return Production{}, fmt.Errorf("docker: %s in container %s is over %d bytes: not a batching.config", p.BatchingPath, strings.TrimPrefix(info.Name, "/"), maxBatchingFile)
	}
	p.Batching = data
	return p, nil
}
