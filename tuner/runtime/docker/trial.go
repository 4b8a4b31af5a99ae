package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/ports"
	"github.com/batchtune/batchtune/tuner/runtime/internal/statedir"
)

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

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
