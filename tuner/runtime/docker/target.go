package docker

import (
	"slices"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
)

func init() {
	runtime.Register(configs.RuntimeDocker, func(t configs.Target, o runtime.Options) (runtime.Runtime, error) {
		return New(TargetOptions(t, o))
	})
}

var _ runtime.InPlace = (*Runtime)(nil)

// TargetOptions maps a study's target (runtime: docker) onto the docker
// runtime's options; Client stays nil, so New makes one from the
// environment (DOCKER_HOST), which Close releases. Field by field:
//
//	target.model.name, .base_path    --model_name, --model_base_path
//	target.ports.grpc, .rest         host ports (fixed; 0 would mean free ones)
//	docker.image | docker.container  a trial image, or a user's container tuned in place
//	docker.model_dir                 bind-mounted read-only at model.base_path
//	                                 (or where the image looks, when unset)
//	docker.env                       NAME=value entries, in name order
//	docker.args, target.flags        server args, the study's flags after
//	docker.gpus, .network, .pull     --gpus, network mode, pull policy
func TargetOptions(t configs.Target, o runtime.Options) Options {
	d := t.Docker
	opts := Options{
		Study:         o.Study,
		StateDir:      o.StateDir,
		Image:         d.Image,
		Existing:      d.Container,
		ModelName:     t.Model.Name,
		ModelBasePath: t.Model.BasePath,
		Env:           runtime.EnvList(d.Env),
		Args:          slices.Concat(d.Args, t.Flags),
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
			base = DefaultModelBasePath + "/" + t.Model.Name
		}
		opts.Mounts = []Mount{{Source: d.ModelDir, Target: base}}
	}
	return opts
}
