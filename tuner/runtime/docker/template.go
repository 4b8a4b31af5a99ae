package docker

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/batchtune/batchtune/tuner/runtime"
)

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
