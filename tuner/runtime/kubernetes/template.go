package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/batchtune/batchtune/tuner/runtime"
)

// ParseTemplate decodes a pod template given as plain data (a study's
// target.kubernetes.template, as decoded from YAML): a Pod (apiVersion v1,
// kind Pod), a PodTemplate's template, or just metadata and spec. Unknown
// fields are refused by name, as kubectl's strict decoding does.
func ParseTemplate(m map[string]any) (*corev1.PodTemplateSpec, error) {
	if len(m) == 0 {
		return nil, nil
	}
	m = clone(m)
	kind, _ := m["kind"].(string)
	switch kind {
	case "", "Pod":
	case "PodTemplate":
		inner, ok := m["template"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("kind PodTemplate without a template")
		}
		m = inner
	default:
		return nil, fmt.Errorf("kind: want Pod or PodTemplate, got %q (for a Deployment, give its spec.template)", kind)
	}
	if av, ok := m["apiVersion"].(string); ok && av != "v1" {
		return nil, fmt.Errorf("apiVersion: want v1, got %q", av)
	}
	delete(m, "apiVersion")
	delete(m, "kind")
	delete(m, "status")
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t corev1.PodTemplateSpec
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("not a pod template: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return &t, nil
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// trialTemplate returns the pod template every trial starts from and the
// index of the TF Serving container in it.
func trialTemplate(o Options) (*corev1.PodTemplateSpec, int, error) {
	t := &corev1.PodTemplateSpec{}
	if o.Template != nil {
		t = o.Template.DeepCopy()
	}
	if len(t.Spec.Containers) == 0 {
		if o.Image == "" {
			return nil, 0, fmt.Errorf("template: spec.containers is empty: no TF Serving container (give one, or an image)")
		}
		name := o.Container
		if name == "" {
			name = DefaultContainer
		}
		t.Spec.Containers = []corev1.Container{{Name: name}}
	}
	idx := -1
	var names []string
	for i, c := range t.Spec.Containers {
		names = append(names, c.Name)
		if (o.Container != "" && c.Name == o.Container) || (o.Container == "" && c.Name == DefaultContainer) {
			idx = i
		}
	}
	switch {
	case idx < 0 && o.Container == "" && len(t.Spec.Containers) == 1:
		idx = 0
	case idx < 0 && o.Container != "":
		return nil, 0, fmt.Errorf("container: the template has no container %q (its containers: %s)", o.Container, strings.Join(names, ", "))
	case idx < 0:
		return nil, 0, fmt.Errorf("template: no TF Serving container: none is named %q among %s; name it, or set container", DefaultContainer, strings.Join(names, ", "))
	}
	c := &t.Spec.Containers[idx]
	if o.Image != "" {
		c.Image = o.Image
	}
	if c.Image == "" {
		return nil, 0, fmt.Errorf("template: container %q has no image", c.Name)
	}
	for _, a := range c.Args {
		if name, ok := runtime.FlagName(a); ok && (name == "enable_batching" || name == "batching_parameters_file") {
			return nil, 0, fmt.Errorf("template: container %q sets --%s itself; each trial sets it", c.Name, name)
		}
	}
	for _, v := range t.Spec.Volumes {
		if v.Name == configVolume {
			return nil, 0, fmt.Errorf("template: volume name %q is reserved for the trial's batching.config", configVolume)
		}
	}
	return t, idx, nil
}

// containerPorts picks the server's ports in the pod: the given ones, the
// container's ports named grpc and rest (or http), or TF Serving's 8500
// and 8501.
func containerPorts(c *corev1.Container, grpc, rest int) (int, int) {
	for _, p := range c.Ports {
		switch strings.ToLower(p.Name) {
		case "grpc":
			if grpc == 0 {
				grpc = int(p.ContainerPort)
			}
		case "rest", "http":
			if rest == 0 {
				rest = int(p.ContainerPort)
			}
		}
	}
	if grpc == 0 {
		grpc = DefaultGRPCPort
	}
	if rest == 0 {
		rest = DefaultRESTPort
	}
	return grpc, rest
}

// objects makes one trial's ConfigMap and pod, both named name.
func (r *Runtime) objects(name string, cfg runtime.Config) (*corev1.ConfigMap, *corev1.Pod) {
	meta := func(base metav1.ObjectMeta) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: map[string]string{}, Annotations: map[string]string{}}
		for k, v := range base.Labels {
			m.Labels[k] = v
		}
		for k, v := range base.Annotations {
			m.Annotations[k] = v
		}
		m.Labels[LabelStudy] = r.studyVal
		m.Labels[LabelRun] = r.run
		m.Labels[LabelRole] = RoleTrial
		m.Annotations[AnnotationOwner] = r.owner
		m.Annotations[AnnotationStudy] = r.opts.Study
		return m
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: meta(metav1.ObjectMeta{}),
		Data: map[string]string{
			runtime.BatchingFile:   string(cfg.Batching),
			runtime.MonitoringFile: string(runtime.MonitoringConfig()),
		},
	}
	t := r.tmpl.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: meta(t.ObjectMeta), Spec: t.Spec}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	grace := int64((r.opts.StopGrace + 999_999_999) / 1_000_000_000)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	noLinks := false
	if pod.Spec.EnableServiceLinks == nil {
		pod.Spec.EnableServiceLinks = &noLinks
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name:         configVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}},
	})
	r.place(&pod.Spec, cfg.Node)
	c := &pod.Spec.Containers[r.ctr]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: configVolume, MountPath: ConfigDir, ReadOnly: true})
	o := r.opts
	args := append([]string(nil), c.Args...)
	if o.ModelName != "" {
		setEnv(c, "MODEL_NAME", o.ModelName)
		setEnv(c, "MODEL_BASE_PATH", path.Dir(o.ModelBasePath))
		args = append(args, "--model_name="+o.ModelName, "--model_base_path="+o.ModelBasePath)
	}
	args = append(args, o.Args...)
	args = append(args, cfg.Args(ConfigDir+"/"+runtime.BatchingFile, ConfigDir+"/"+runtime.MonitoringFile)...)
	c.Args = args
	return cm, pod
}

// HostnameKey is the node label that spreads trial pods one per node.
const HostnameKey = "kubernetes.io/hostname"

// place adds to the template's own placement rules: with SpreadNode a
// required anti-affinity to the run's other trial pods (no two on a node),
// and with a node, a required node affinity to it, ANDed into each of the
// template's own node selector terms (terms are ORed, so adding a term of
// its own would widen them instead).
func (r *Runtime) place(spec *corev1.PodSpec, node string) {
	if r.opts.Spread == SpreadNode {
		if spec.Affinity == nil {
			spec.Affinity = &corev1.Affinity{}
		}
		if spec.Affinity.PodAntiAffinity == nil {
			spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		aa := spec.Affinity.PodAntiAffinity
		aa.RequiredDuringSchedulingIgnoredDuringExecution = append(aa.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelStudy: r.studyVal, LabelRun: r.run, LabelRole: RoleTrial}},
			TopologyKey:   HostnameKey,
		})
	}
	if node == "" {
		return
	}
	on := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(req.NodeSelectorTerms) == 0 {
		req.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchFields = append(req.NodeSelectorTerms[i].MatchFields, on)
	}
}

func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}
