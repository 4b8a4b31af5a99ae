package process

import (
	"slices"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
)

func init() {
	runtime.Register(configs.RuntimeProcess, func(t configs.Target, o runtime.Options) (runtime.Runtime, error) {
		return New(TargetOptions(t, o))
	})
}

// TargetOptions maps a study's target (runtime: process) onto the process
// runtime's options. Field by field:
//
//	target.model.name, .base_path    --model_name, --model_base_path
//	target.ports.grpc, .rest         ports (fixed; 0 would mean free ones)
//	process.binary                   the command
//	process.args, target.flags       its first args, the study's flags after
//	process.env                      NAME=value entries, in name order
func TargetOptions(t configs.Target, o runtime.Options) Options {
	return Options{
		Binary:        t.Process.Binary,
		ModelName:     t.Model.Name,
		ModelBasePath: t.Model.BasePath,
		Args:          slices.Concat(t.Process.Args, t.Flags),
		Env:           runtime.EnvList(t.Process.Env),
		GRPCPort:      t.Ports.GRPC,
		RESTPort:      t.Ports.REST,
		StateDir:      o.StateDir,
		Study:         o.Study,
		StopGrace:     o.StopGrace,
		Logger:        o.Logger,
	}
}
