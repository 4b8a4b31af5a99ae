package kubernetes

import (
	"fmt"
	"slices"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
)

func init() {
	runtime.Register(configs.RuntimeKubernetes, func(t configs.Target, o runtime.Options) (runtime.Runtime, error) {
		opts, err := TargetOptions(t, o)
		if err != nil {
			return nil, err
		}
		return New(opts)
	})
}

// TargetOptions maps a study's target (runtime: kubernetes) onto the
// runtime's options. Client stays nil, so New makes one from the
// kubeconfig (or in-cluster config). Field by field:
//
//	target.model.name, .base_path       --model_name, --model_base_path
//	target.ports.grpc, .rest            the server's ports in the pod
//	kubernetes.kubeconfig, .context     the cluster
//	kubernetes.namespace                where trial pods go
//	kubernetes.template, .image         the trial pod
//	kubernetes.container                the TF Serving container in it
//	kubernetes.args, target.flags       server args, the study's flags after
//	kubernetes.spread                   parallel trial pods one per node, or not
//	kubernetes.pending_timeout          how long a pod may take to start
func TargetOptions(t configs.Target, o runtime.Options) (Options, error) {
	k := t.Kubernetes
	tmpl, err := ParseTemplate(k.Template)
	if err != nil {
		return Options{}, fmt.Errorf("kubernetes: target.kubernetes.template: %w", err)
	}
	return Options{
		Kubeconfig:     k.Kubeconfig,
		Context:        k.Context,
		Namespace:      k.Namespace,
		Study:          o.Study,
		StateDir:       o.StateDir,
		Template:       tmpl,
		Image:          k.Image,
		Container:      k.Container,
		ModelName:      t.Model.Name,
		ModelBasePath:  t.Model.BasePath,
		Args:           slices.Concat(k.Args, t.Flags),
		GRPCPort:       t.Ports.GRPC,
		RESTPort:       t.Ports.REST,
		Spread:         k.Spread,
		PendingTimeout: k.PendingTimeout.D(),
		StopGrace:      o.StopGrace,
		Logger:         o.Logger,
	}, nil
}
