package configs

import (
	"regexp"
	"strings"
)

// KubernetesTarget is the trial pod of the kubernetes runtime: a pod
// template as in a manifest (kept as plain data here; the runtime decodes
// it strictly into a Kubernetes pod template), an image, or both.
type KubernetesTarget struct {
	Kubeconfig string `yaml:"kubeconfig" json:"kubeconfig"`
	Context    string `yaml:"context" json:"context"`
	Namespace  string `yaml:"namespace" json:"namespace"`
	// Template is a Pod or pod template (metadata and spec).
	Template map[string]any `yaml:"template" json:"template"`
	// Image replaces the TF Serving container's image.
	Image string `yaml:"image" json:"image"`
	// Container names the TF Serving container in Template.
	Container string `yaml:"container" json:"container"`
	// Args are appended verbatim to the container's args (not checked).
	Args []string `yaml:"args" json:"args"`
	// Spread keeps parallel trial pods apart: "node" (one per node) or
	// "none" (placed by their resource requests).
	Spread string `yaml:"spread" json:"spread"`
	// PendingTimeout bounds the wait for a trial pod's container to start.
	PendingTimeout Duration `yaml:"pending_timeout" json:"pending_timeout"`
	// Deployment would tune an existing Deployment in place; refused.
	Deployment string `yaml:"deployment" json:"deployment"`
}

// Values of target.kubernetes.spread.
const (
	SpreadNode = "node"
	SpreadNone = "none"
)

// dnsLabel is a Kubernetes object name that is also a DNS label (RFC 1123).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// kubernetes checks target.kubernetes; the template's content is checked
// by the runtime, which knows Kubernetes' types.
func (chk *studyCheck) kubernetes() {
	t := chk.s.Target
	k := t.Kubernetes
	on := t.Runtime == RuntimeKubernetes
	for _, f := range []string{"kubeconfig", "context", "namespace", "template", "image", "container", "args", "spread", "deployment"} {
		chk.notSetUnless("target.kubernetes."+f, "target.runtime is kubernetes", on)
	}
	if !on {
		return
	}
	if k.Deployment != "" {
		chk.ps.Add("target.kubernetes.deployment", "tuning an existing Deployment in place is not supported yet; give its pod template as target.kubernetes.template (trials then run as pods beside it)")
	}
	if k.Image == "" && len(k.Template) == 0 {
		chk.ps.Add("target.kubernetes", "needs template (the trial pod) or image")
	}
	if strings.ContainsAny(k.Image, " \t") {
		chk.ps.Add("target.kubernetes.image", "must be an image reference without spaces, got %q", k.Image)
	}
	if k.Namespace != "" && !dnsLabel.MatchString(k.Namespace) {
		chk.ps.Add("target.kubernetes.namespace", "must be a namespace name (lower-case letters, digits and '-', at most 63), got %q", k.Namespace)
	}
	if k.Container != "" && !dnsLabel.MatchString(k.Container) {
		chk.ps.Add("target.kubernetes.container", "must be a container name (lower-case letters, digits and '-', at most 63), got %q", k.Container)
	}
	if t.Model.BasePath != "" && !strings.HasPrefix(t.Model.BasePath, "/") {
		chk.ps.Add("target.model.base_path", "must be an absolute path inside the container with runtime kubernetes, got %q", t.Model.BasePath)
	}
	chk.positive("target.kubernetes.pending_timeout", k.PendingTimeout)
	switch k.Spread {
	case "", SpreadNode, SpreadNone:
	default:
		chk.ps.Add("target.kubernetes.spread", "want %q (parallel trial pods on different nodes) or %q (placed by their resource requests), got %q", SpreadNode, SpreadNone, k.Spread)
	}
}
