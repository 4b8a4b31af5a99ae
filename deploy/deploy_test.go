// Package deploy_test checks the deployment files under deploy/ against
// what batchtune expects of them: the Kubernetes manifests (objects, RBAC
// scope, the CronJob's command and mounts, the study in the ConfigMap
// validated by batchtune's own rules) and the systemd unit (its command,
// signals and, where systemd-analyze exists, systemd's own verification).
// The Dockerfile is built by the command in deploy/README.md.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner"
)

// object is the part of a Kubernetes object the checks read.
type object struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   map[string]any `yaml:"metadata"`
	Raw        map[string]any `yaml:"-"`
	File       string         `yaml:"-"`
}

func (o object) name() string { s, _ := o.Metadata["name"].(string); return s }

// manifests reads every object of the kustomization's resources.
func manifests(t *testing.T) map[string]object {
	t.Helper()
	var kust struct {
		Namespace string   `yaml:"namespace"`
		Resources []string `yaml:"resources"`
	}
	readYAML(t, "kubernetes/kustomization.yaml", &kust)
	if kust.Namespace != "batchtune" {
		t.Errorf("kustomization namespace %q, want batchtune", kust.Namespace)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	var listed []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			listed = append(listed, filepath.Base(f))
		}
	}
	if diff := cmp.Diff(listed, kust.Resources, cmp.Transformer("sort", func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return out
	})); diff != "" {
		t.Errorf("kustomization resources vs files (-files +resources):\n%s", diff)
	}
	out := map[string]object{}
	for _, f := range kust.Resources {
		data, err := os.ReadFile(filepath.Join("kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var raw map[string]any
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			var o object
			b, _ := yaml.Marshal(raw)
			if err := yaml.Unmarshal(b, &o); err != nil {
				t.Fatal(err)
			}
			o.Raw, o.File = raw, f
			key := o.Kind + "/" + o.name()
			if _, dup := out[key]; dup {
				t.Errorf("%s defined twice", key)
			}
			out[key] = o
		}
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// get walks a decoded YAML tree: keys of maps, indexes of lists.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %q", path, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", path, k)
			}
			v = l[k]
		}
	}
	return v
}

func TestKubernetesObjects(t *testing.T) {
	objs := manifests(t)
	var kinds []string
	for k := range objs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	want := []string{
		"ConfigMap/batchtune-study", "CronJob/batchtune", "Namespace/batchtune", "PersistentVolumeClaim/batchtune-state",
		"Role/batchtune-read-study", "RoleBinding/batchtune-read-study", "ServiceAccount/batchtune",
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// TestKubernetesRBAC: the job may read its own ConfigMap, and nothing
// cluster-wide.
func TestKubernetesRBAC(t *testing.T) {
	objs := manifests(t)
	for key := range objs {
		if strings.HasPrefix(key, "ClusterRole") {
			t.Errorf("%s: nothing cluster-wide", key)
		}
	}
	role := objs["Role/batchtune-read-study"]
	rules := get(t, role.Raw, "rules")
	wantRules := []any{map[string]any{
		"apiGroups": []any{""}, "resources": []any{"configmaps"},
		"resourceNames": []any{"batchtune-study"}, "verbs": []any{"get"},
	}}
	if diff := cmp.Diff(wantRules, rules); diff != "" {
		t.Errorf("role rules (-want +got):\n%s", diff)
	}
	rb := objs["RoleBinding/batchtune-read-study"].Raw
	if got := get(t, rb, "roleRef", "kind"); got != "Role" {
		t.Errorf("roleRef kind %v, want Role", got)
	}
	if got := get(t, rb, "roleRef", "name"); got != "batchtune-read-study" {
		t.Errorf("roleRef name %v", got)
	}
	if got := get(t, rb, "subjects", 0, "name"); got != "batchtune" {
		t.Errorf("subject %v, want the batchtune ServiceAccount", got)
	}
	if _, ok := objs["ConfigMap/batchtune-study"]; !ok {
		t.Error("the Role names a ConfigMap that is not defined")
	}
}

// TestKubernetesCronJob: a nightly one-shot tune of the ConfigMap's study,
// never two at once, unprivileged, with its state on the volume.
func TestKubernetesCronJob(t *testing.T) {
	objs := manifests(t)
	cj := objs["CronJob/batchtune"].Raw
	if _, err := cron.ParseStandard(get(t, cj, "spec", "schedule").(string)); err != nil {
		t.Errorf("the CronJob's schedule: %v", err)
	}
	if got := get(t, cj, "spec", "concurrencyPolicy"); got != "Forbid" {
		t.Errorf("concurrencyPolicy %v, want Forbid", got)
	}
	pod := get(t, cj, "spec", "jobTemplate", "spec", "template", "spec")
	if got := get(t, pod, "serviceAccountName"); got != "batchtune" {
		t.Errorf("serviceAccountName %v", got)
	}
	c := get(t, pod, "containers", 0)
	var args []string
	for _, a := range get(t, c, "args").([]any) {
		args = append(args, a.(string))
	}
	if len(args) == 0 || args[0] != "tune" {
		t.Fatalf("args %q, want a one-shot tune", args)
	}
	config := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			config = v
		}
	}
	mounts := map[string]string{}
	for _, m := range get(t, c, "volumeMounts").([]any) {
		mounts[get(t, m, "mountPath").(string)] = get(t, m, "name").(string)
	}
	if mounts[filepath.Dir(config)] != "study" {
		t.Errorf("--config=%s is not in the study volume's mount (mounts %v)", config, mounts)
	}
	if mounts["/var/lib/batchtune"] != "state" {
		t.Errorf("the store's directory is not on the state volume (mounts %v)", mounts)
	}
	vols := map[string]any{}
	for _, v := range get(t, pod, "volumes").([]any) {
		vols[get(t, v, "name").(string)] = v
	}
	if got := get(t, vols["study"], "configMap", "name"); got != "batchtune-study" {
		t.Errorf("study volume from %v, want the batchtune-study ConfigMap", got)
	}
	if got := get(t, vols["state"], "persistentVolumeClaim", "claimName"); got != "batchtune-state" {
		t.Errorf("state volume from %v", got)
	}
	sc := get(t, c, "securityContext")
	if get(t, sc, "allowPrivilegeEscalation") != false || get(t, sc, "readOnlyRootFilesystem") != true {
		t.Errorf("container security context %v: want no privilege escalation and a read-only root", sc)
	}
	if get(t, pod, "securityContext", "runAsNonRoot") != true {
		t.Error("the pod may run as root")
	}
}

// TestKubernetesStudy: the study the ConfigMap holds passes batchtune's own
// validation (the files it names exist only in the pod).
func TestKubernetesStudy(t *testing.T) {
	objs := manifests(t)
	doc, _ := get(t, objs["ConfigMap/batchtune-study"].Raw, "data", "study.yaml").(string)
	if doc == "" {
		t.Fatal("the ConfigMap holds no study.yaml")
	}
	s, err := configs.ParseStudy("study.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(tuner.SpaceCheck(4, 0)); err != nil {
		t.Fatal(err)
	}
	if s.Target.Runtime != configs.RuntimeProcess || !strings.HasPrefix(s.Export.Path, "/var/lib/batchtune/") {
		t.Errorf("runtime %s, export %s: want the process runtime and an export on the state volume", s.Target.Runtime, s.Export.Path)
	}
}

// unit reads the systemd unit's Service section, continuation lines joined.
func unit(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("systemd/batchtune.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section, pending := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if strings.HasSuffix(line, "\\") {
			pending = strings.TrimSuffix(line, "\\")
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, _ := strings.Cut(line, "=")
			out[section+"."+k] = append(out[section+"."+k], strings.Join(strings.Fields(v), " "))
		}
	}
	return out
}

func TestSystemdUnit(t *testing.T) {
	u := unit(t)
	exec := strings.Fields(u["Service.ExecStart"][0])
	if exec[1] != "daemon" || !slices.Contains(exec, "--studies") || !slices.Contains(exec, "--db") {
		t.Errorf("ExecStart %q: want batchtune daemon --studies ... --db ...", exec)
	}
	if i := slices.Index(exec, "--listen"); i < 0 || !strings.HasPrefix(exec[i+1], "127.0.0.1:") {
		t.Errorf("ExecStart %q: want the API on loopback", exec)
	}
	for key, want := range map[string]string{
		"Service.KillSignal":      "SIGTERM", // the graceful stop
		"Service.KillMode":        "mixed",   // only batchtune gets it; it stops its trial servers
		"Service.ExecReload":      "/bin/kill -HUP $MAINPID",
		"Service.NoNewPrivileges": "yes",
		"Service.ProtectSystem":   "strict",
		"Service.StateDirectory":  "batchtune",
		"Install.WantedBy":        "multi-user.target",
	} {
		if got := u[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if got := u["Service.TimeoutStopSec"]; len(got) != 1 || got[0] == "" {
		t.Error("no TimeoutStopSec: the default 90s may cut a trial's graceful end short")
	}
}

// TestSystemdVerify runs systemd's own check of the unit, its binary
// replaced by a stand-in executable (verify checks that it exists).
func TestSystemdVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		// make test (and CI, whose .ci/run installs systemd) requires it.
		if os.Getenv("BATCHTUNE_REQUIRE_TOOLS") != "" {
			t.Fatal("systemd-analyze is not installed (apt-get install systemd) and BATCHTUNE_REQUIRE_TOOLS is set")
		}
		t.Skip("systemd-analyze is not installed; TestSystemdUnit still checks the unit's keys")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "batchtune")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("systemd/batchtune.service")
	if err != nil {
		t.Fatal(err)
	}
	unitPath := filepath.Join(dir, "batchtune.service")
	if err := os.WriteFile(unitPath, bytes.ReplaceAll(data, []byte("/usr/local/bin/batchtune"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unitPath).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
