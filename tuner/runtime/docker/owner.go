package docker

import (
	"context"
	"errors"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/batchtune/batchtune/tuner/runtime/internal/owner"
)

// ErrTrialInUse: a trial container of the study belongs to a batchtune
// that is still running (here, or on another host sharing the engine).
var ErrTrialInUse = errors.New("docker: trial container in use")

// ownerState says whether the batchtune named by a container's owner
// label (pid@host) is gone, so that its container may be removed (the
// rule is package owner's); why names a live owner and what to do.
func ownerState(label, self, host string, alive func(pid int) bool) (gone bool, why string) {
	v := owner.Check(label, self, host, alive)
	switch {
	case v.Gone:
		return true, ""
	case v.Remote:
		return false, "in use by " + v.String() + ": stop that batchtune, or run `batchtune cleanup --force` there"
	}
	return false, "in use by " + v.String()
}

// Orphan is a trial container whose batchtune is gone.
type Orphan struct {
	ID, Name, Study, Owner, State string
}

// Orphans lists every batchtune trial container on the engine (any study)
// whose owner is gone, e.g. after a kill -9: it keeps running, holding its
// port (and a GPU), until the same study runs again or it is removed.
// remove removes them as well.
func Orphans(ctx context.Context, cli *client.Client, remove bool) ([]Orphan, error) {
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelRole+"="+RoleTrial),
	)})
	if err != nil {
		return nil, apiErr("listing trial containers", err)
	}
	self, host := owner.Self()
	var out []Orphan
	var errs []error
	for _, c := range list {
		if gone, _ := ownerState(c.Labels[LabelOwner], self, host, owner.PIDAlive); !gone {
			continue
		}
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Orphan{ID: c.ID, Name: name, Study: c.Labels[LabelStudy], Owner: c.Labels[LabelOwner], State: c.State})
		if remove {
			if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, apiErr("removing trial container "+name, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

func firstName(names []string, id string) string {
	if len(names) > 0 {
		return names[0]
	}
	return id
}
