package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/batchtune/batchtune/internal/atomicfile"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// snapshotVersion is the schema of the snapshot file.
const snapshotVersion = 1

// snapshotFile is where, under the study's directory, the snapshot of the
// user's container lives while the container is stopped for tuning.
const snapshotFile = "existing-container.json"

// snapshot is a user's container as it was before batchtune changed
// anything: the engine's own inspect document, verbatim, and whether it ran.
// It is on disk from before the container is stopped until after it is
// back, so a batchtune killed in between leaves the way back behind.
type snapshot struct {
	Version int             `json:"version"`
	Study   string          `json:"study"`
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Running bool            `json:"running"`
	Taken   time.Time       `json:"taken"`
	Owner   string          `json:"owner"`
	Inspect json.RawMessage `json:"inspect"`
}

func (r *Runtime) snapshotPath() string { return filepath.Join(r.dir, snapshotFile) }

// readSnapshot returns the snapshot on disk, or nil when there is none.
func (r *Runtime) readSnapshot() (*snapshot, error) {
	data, err := os.ReadFile(r.snapshotPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSnapshot, r.snapshotPath(), err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("%w: %s: schema version %d, this batchtune reads %d", ErrSnapshot, r.snapshotPath(), s.Version, snapshotVersion)
	}
	if s.ID == "" || len(s.Inspect) == 0 {
		return nil, fmt.Errorf("%w: %s: no container in it", ErrSnapshot, r.snapshotPath())
	}
	return &s, nil
}

// takeOver snapshots the user's container to disk, derives the trial
// template from it, and stops it. Nothing is changed before the snapshot is
// safely written.
func (r *Runtime) takeOver(ctx context.Context) error {
	cctx, cancel := r.call(ctx)
	defer cancel()
	info, raw, err := r.cli.ContainerInspectWithRaw(cctx, r.opts.Existing, false)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("%w: %s", ErrContainerNotFound, r.opts.Existing)
		}
		return apiErr("inspecting "+r.opts.Existing, err)
	}
	if info.ContainerJSONBase == nil || info.Config == nil || info.HostConfig == nil || info.State == nil {
		return fmt.Errorf("docker: inspecting %s: the engine's answer lacks its configuration", r.opts.Existing)
	}
	tmpl, err := r.existingTemplate(info)
	if err != nil {
		return err
	}
	snap := &snapshot{
		Version: snapshotVersion,
		Study:   r.opts.Study,
		ID:      info.ID,
		Name:    strings.TrimPrefix(info.Name, "/"),
		Running: info.State.Running,
		Taken:   time.Now().UTC(),
		Owner:   r.owner,
		Inspect: raw,
	}
	data, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	if err := atomicfile.Write(r.snapshotPath(), data, 0o600); err != nil {
		return fmt.Errorf("%w: %v (the container was not touched)", ErrSnapshot, err)
	}
	r.snap, r.tmpl = snap, tmpl
	r.log.Info("snapshotted the user's container", "container", snap.Name, "id", snap.ID, "running", snap.Running, "file", r.snapshotPath())
	if snap.Running {
		grace := int(math.Ceil(r.opts.StopGrace.Seconds()))
		sctx, cancel := context.WithTimeout(ctx, r.opts.StopGrace+r.opts.APITimeout)
		defer cancel()
		if err := r.cli.ContainerStop(sctx, snap.ID, container.StopOptions{Timeout: &grace}); err != nil && !errdefs.IsNotFound(err) {
			// Leave nothing half done: put it back now.
			rerr := r.restoreUser(context.WithoutCancel(ctx), snap)
			r.snap = nil
			return errors.Join(fmt.Errorf("docker: stopping the user's container %s: %w", snap.Name, err), rerr)
		}
		r.log.Info("stopped the user's container for tuning", "container", snap.Name)
	}
	return nil
}

// restoreUser puts the user's container back as the snapshot says: started
// again if it ran and still exists, recreated from the snapshot (same name,
// configuration, networks) if it is gone. On success the snapshot file is
// removed; on failure it stays and the error wraps ErrRestore.
func (r *Runtime) restoreUser(ctx context.Context, snap *snapshot) error {
	if err := r.putBack(ctx, snap); err != nil {
		err = fmt.Errorf("%w: %s (%s): %w (snapshot kept in %s)", ErrRestore, snap.Name, shortID(snap.ID), err, r.snapshotPath())
		if client.IsErrConnectionFailed(err) {
			err = fmt.Errorf("%w: %w", ErrEngineUnreachable, err)
		}
		return err
	}
	if err := os.Remove(r.snapshotPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("docker: removing %s: %w", r.snapshotPath(), err)
	}
	r.log.Info("restored the user's container", "container", snap.Name, "running", snap.Running)
	return nil
}

func (r *Runtime) putBack(ctx context.Context, snap *snapshot) error {
	cctx, cancel := r.call(ctx)
	defer cancel()
	info, err := r.cli.ContainerInspect(cctx, snap.ID)
	switch {
	case err == nil:
		if snap.Running && (info.State == nil || !info.State.Running) {
			if err := r.cli.ContainerStart(cctx, snap.ID, container.StartOptions{}); err != nil {
				return fmt.Errorf("starting: %w", err)
			}
		}
	case errdefs.IsNotFound(err):
		if other, err := r.cli.ContainerInspect(cctx, snap.Name); err == nil {
			// Someone made a new container under the name since: theirs
			// now, not ours to change.
			r.log.Warn("a different container now has the user's container's name; leaving it", "name", snap.Name, "id", other.ID)
			return nil
		}
		var old container.InspectResponse
		if err := json.Unmarshal(snap.Inspect, &old); err != nil || old.Config == nil || old.HostConfig == nil {
			return fmt.Errorf("the snapshot's inspect document cannot be read back: %v", err)
		}
		var netcfg *network.NetworkingConfig
		if old.NetworkSettings != nil && len(old.NetworkSettings.Networks) > 0 {
			netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{}}
			for name, es := range old.NetworkSettings.Networks {
				netcfg.EndpointsConfig[name] = endpointConfig(es, snap.ID)
			}
		}
		created, err := r.cli.ContainerCreate(cctx, old.Config, old.HostConfig, netcfg, nil, snap.Name)
		if err != nil {
			return fmt.Errorf("recreating: %w", err)
		}
		r.log.Warn("recreated the user's container from its snapshot", "name", snap.Name, "old_id", snap.ID, "new_id", created.ID)
		if snap.Running {
			if err := r.cli.ContainerStart(cctx, created.ID, container.StartOptions{}); err != nil {
				return fmt.Errorf("starting the recreated container: %w", err)
			}
		}
	default:
		return fmt.Errorf("inspecting: %w", err)
	}
	return nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// existingTemplate derives the trial template from the user's container:
// its image (by ID), entrypoint, arguments without the flags a trial sets,
// environment, mounts, resources, devices and networks, publishing the
// server's ports where the user's container publishes them. What Options
// adds (Env, Mounts, Args) comes on top.
func (r *Runtime) existingTemplate(info container.InspectResponse) (*template, error) {
	o := r.opts
	t := &template{
		config:   *info.Config,
		host:     *info.HostConfig,
		grpcPort: o.ContainerGRPCPort,
		restPort: o.ContainerRESTPort,
		hostIP:   o.HostIP,
		sourceID: info.ID,
	}
	t.config.Image = info.Image
	if o.Image != "" {
		t.config.Image = o.Image
	}
	t.config.Labels = nil
	t.config.Env = append([]string(nil), info.Config.Env...)
	// Keep the user's arguments except the ones a trial sets, reading the
	// ports the server listens on from them.
	for _, a := range info.Config.Cmd {
		name, ok := runtime.FlagName(a)
		if ok && isReserved(name) {
			_, v, _ := strings.Cut(a, "=")
			n, err := strconv.Atoi(v)
			switch {
			case name == "port" && err == nil:
				t.grpcPort = n
			case name == "rest_api_port" && err == nil:
				t.restPort = n
			}
			continue
		}
		t.cmd = append(t.cmd, a)
	}
	t.config.Env, t.cmd = modelSettings(o, t.config.Env, t.cmd)
	if devices, _ := deviceRequests(o.GPUs); devices != nil {
		t.host.DeviceRequests = devices
	}
	t.hostNet = info.HostConfig.NetworkMode.IsHost()
	if t.hostNet {
		t.hostGRPC, t.hostREST = t.grpcPort, t.restPort
	} else {
		bound := func(cport int) (string, int) {
			for _, b := range info.HostConfig.PortBindings[nat.Port(strconv.Itoa(cport)+"/tcp")] {
				if n, err := strconv.Atoi(b.HostPort); err == nil && n > 0 {
					return b.HostIP, n
				}
			}
			return "", 0
		}
		ip, g := bound(t.grpcPort)
		ip2, rp := bound(t.restPort)
		t.hostGRPC, t.hostREST = g, rp
		// Ports the user publishes stay published as they are (on all
		// interfaces when the user's binding says so); one the user does
		// not publish goes on HostIP at a port the engine picks.
		if g != 0 || rp != 0 {
			if g != 0 {
				t.hostIP = ip
			} else {
				t.hostIP = ip2
			}
		}
	}
	if info.NetworkSettings != nil && !t.hostNet {
		t.networks = info.NetworkSettings.Networks
	}
	return t, nil
}

func isReserved(name string) bool {
	for _, r := range runtime.Reserved {
		if r == name {
			return true
		}
	}
	return false
}
