// Package target makes the runtime a study's target names: it turns
// configs.Target (runtime, model, ports, flags, and the docker or process
// section) into the options of package docker or process, so that the
// tuner need not know which study field becomes which server flag, mount or
// environment variable.
//
// The mapping, field by field:
//
//	target.model.name, .base_path    --model_name, --model_base_path
//	target.ports.grpc, .rest         host ports (fixed; 0 would mean free ones)
//	target.flags                     server flags of every trial, after the
//	                                 runtime's own args and before the trial's
//	process.binary, .args, .env      the command, its first args, its environment
//	docker.image | docker.container  a trial image, or a user's container tuned in place
//	docker.model_dir                 bind-mounted read-only at model.base_path
//	docker.env, .args, .gpus,        environment, extra args (before target.flags),
//	  .network, .pull                --gpus, network mode, pull policy
//
// Environment maps become NAME=value lists in name order, so that the same
// study makes the same container.
package target
