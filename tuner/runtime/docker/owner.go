package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// ErrTrialInUse: a trial container of the study belongs to a batchtune
// that is still running (here, or on another host sharing the engine).
var ErrTrialInUse = errors.New("docker: trial container in use")

// ownerState says whether the batchtune named by a container's owner
// label (pid@host) is gone, so that its container may be removed. self is
// this process's owner label, host this machine's name; alive reports
// whether a local pid runs. A container with no owner label (an older
// batchtune) counts as gone; one owned by a batchtune on another host
// cannot be checked from here and counts as live.
func ownerState(owner, self, host string, alive func(pid int) bool) (gone bool, why string) {
	if owner == "" || owner == self {
		return true, ""
	}
	pidText, ownerHost, ok := strings.Cut(owner, "@")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return true, ""
	}
	if ownerHost != host {
		return false, fmt.Sprintf("in use by pid %d on host %s (not checked from here: stop that batchtune, or run `batchtune cleanup --force` there)", pid, ownerHost)
	}
	if alive(pid) {
		return false, fmt.Sprintf("in use by pid %d on host %s", pid, ownerHost)
	}
	return true, ""
}

// pidAlive reports whether pid runs on this machine.
func pidAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
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
	host, _ := os.Hostname()
	self := strconv.Itoa(os.Getpid()) + "@" + host
	var out []Orphan
	var errs []error
	for _, c := range list {
		if gone, _ := ownerState(c.Labels[LabelOwner], self, host, pidAlive); !gone {
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
