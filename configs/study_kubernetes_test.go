package configs

import (
	"strings"
	"testing"
)

// TestKubernetesTargetProblemsNameTheField: the kubernetes section's
// mistakes are reported by field, and its keys are refused under another
// runtime.
func TestKubernetesTargetProblemsNameTheField(t *testing.T) {
	for _, tc := range []struct{ name, target, want string }{
		{"nothing to run", "runtime: kubernetes\n  kubernetes: {namespace: default}", "target.kubernetes: needs template (the trial pod) or image"},
		{"bad namespace", "runtime: kubernetes\n  kubernetes: {image: x, namespace: My_NS}", "target.kubernetes.namespace: must be a namespace name"},
		{"deployment in place", "runtime: kubernetes\n  kubernetes: {image: x, deployment: ranker}", "target.kubernetes.deployment: tuning an existing Deployment in place is not supported yet"},
		{"relative base path", "runtime: kubernetes\n  model: {name: m, base_path: models/m}\n  kubernetes: {image: x}", "target.model.base_path: must be an absolute path inside the container with runtime kubernetes"},
		{"zero pending timeout", "runtime: kubernetes\n  kubernetes: {image: x, pending_timeout: 0s}", "target.kubernetes.pending_timeout: must be a positive duration"},
		{"bad spread", "runtime: kubernetes\n  kubernetes: {image: x, spread: zone}", "target.kubernetes.spread: want \"node\""},
		{"under docker", "runtime: docker\n  docker: {image: x}\n  kubernetes: {image: y}", "target.kubernetes.image: applies only when target.runtime is kubernetes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "name: k\ntarget:\n  " + tc.target + "\n"
			if !strings.Contains(tc.target, "model:") {
				doc = "name: k\ntarget:\n  model: {name: m}\n  " + tc.target + "\n"
			}
			doc += "slo: {latency: 100ms}\n"
			_, err := ParseStudy("study.yaml", []byte(doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a problem saying %q", err, tc.want)
			}
		})
	}
	ok := "name: k\ntarget:\n  runtime: kubernetes\n  model: {name: m}\n  kubernetes:\n    template:\n      spec:\n        containers: [{name: tfserving, image: x}]\nslo: {latency: 100ms}\nsearch: {parallelism: 3}\n"
	s, err := ParseStudy("study.yaml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if s.Target.Model.BasePath != "/models/m" || len(s.Target.Kubernetes.Template) == 0 || s.Search.Parallelism != 3 || s.Target.Kubernetes.Spread != SpreadNode {
		t.Errorf("decoded %+v", s.Target)
	}
}
