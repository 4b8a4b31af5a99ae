package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/batchtune/batchtune/tuner/runtime/internal/owner"
	"github.com/batchtune/batchtune/tuner/runtime/internal/statedir"
)

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
		if gone, why := ownerState(c.Labels[LabelOwner], r.owner, host, owner.PIDAlive); !gone {
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
