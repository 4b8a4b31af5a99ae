package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner"
	btruntime "github.com/batchtune/batchtune/tuner/runtime"
	k8s "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
)

// runtimeDir holds the manifests that run batchtune on Kubernetes with the
// kubernetes runtime (a pod per trial).
const runtimeDir = "kubernetes/runtime"

// runtimeNamespace is the namespace the kustomization puts them in.
const runtimeNamespace = "batchtune-tuning"

// runtimeSet is the runtime manifests, decoded strictly into Kubernetes'
// own types (an unknown or misspelt field fails), in file order.
type runtimeSet struct {
	objs  []k8sruntime.Object
	image string // the kustomization's image, name:tag
}

func (s runtimeSet) find(kind, name string) k8sruntime.Object {
	for _, o := range s.objs {
		m, _ := metaOf(o)
		if o.GetObjectKind().GroupVersionKind().Kind == kind && m.GetName() == name {
			return o
		}
	}
	return nil
}

func metaOf(o k8sruntime.Object) (metav1.Object, bool) {
	m, ok := o.(metav1.Object)
	return m, ok
}

// runtimeManifests reads the kustomization's resources, checking that it
// lists every YAML file of the directory.
func runtimeManifests(t testing.TB) runtimeSet {
	t.Helper()
	var kust struct {
		Namespace string   `yaml:"namespace"`
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	data, err := os.ReadFile(filepath.Join(runtimeDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if kust.Namespace != runtimeNamespace {
		t.Errorf("kustomization namespace %q, want %q", kust.Namespace, runtimeNamespace)
	}
	files, _ := filepath.Glob(filepath.Join(runtimeDir, "*.yaml"))
	var listed []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			listed = append(listed, filepath.Base(f))
		}
	}
	sorted := cmp.Transformer("sort", func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return out
	})
	if diff := cmp.Diff(listed, kust.Resources, sorted); diff != "" {
		t.Errorf("%s: kustomization resources vs files (-files +resources):\n%s", runtimeDir, diff)
	}
	var set runtimeSet
	if len(kust.Images) != 1 {
		t.Fatalf("kustomization images %+v, want batchtune's alone", kust.Images)
	}
	set.image = kust.Images[0].NewName + ":" + kust.Images[0].NewTag
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, f := range kust.Resources {
		data, err := os.ReadFile(filepath.Join(runtimeDir, f))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			m, ok := metaOf(obj)
			if !ok || m.GetName() == "" {
				t.Fatalf("%s: an object without a name", f)
			}
			if m.GetNamespace() != "" {
				t.Errorf("%s: %s sets namespace %q; the kustomization (or kubectl -n) decides it", f, m.GetName(), m.GetNamespace())
			}
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			if set.find(kind, m.GetName()) != nil {
				t.Errorf("%s/%s defined twice", kind, m.GetName())
			}
			set.objs = append(set.objs, obj)
		}
	}
	return set
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

func TestRuntimeObjects(t *testing.T) {
	set := runtimeManifests(t)
	var got []string
	for _, o := range set.objs {
		m, _ := metaOf(o)
		got = append(got, o.GetObjectKind().GroupVersionKind().Kind+"/"+m.GetName())
	}
	slices.Sort(got)
	want := []string{
		"ConfigMap/batchtune-daemon-studies", "ConfigMap/batchtune-study", "CronJob/batchtune-nightly",
		"Deployment/batchtune-daemon", "Job/batchtune-tune", "Namespace/" + runtimeNamespace,
		"PersistentVolumeClaim/batchtune-daemon-state", "PersistentVolumeClaim/batchtune-state",
		"Role/batchtune-trials", "RoleBinding/batchtune-trials", "Service/batchtune-daemon", "ServiceAccount/batchtune",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// runtimeRules are the API calls of tuner/runtime/kubernetes: pods are
// created, read and watched until they run and end, listed and deleted
// (Recover, Stop); a dead server's log tail is read; the trial's ConfigMap
// is created, listed and deleted like its pod.
var runtimeRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "delete", "get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "delete", "list"}},
}

// TestRuntimeRBAC: the runtime's calls in its namespace, nothing more and
// nothing cluster-wide; every batchtune pod runs as the bound account.
func TestRuntimeRBAC(t *testing.T) {
	set := runtimeManifests(t)
	for _, o := range set.objs {
		switch o.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			t.Errorf("%T: nothing cluster-wide", o)
		}
	}
	role, ok := set.find("Role", "batchtune-trials").(*rbacv1.Role)
	if !ok {
		t.Fatal("no Role batchtune-trials")
	}
	if diff := cmp.Diff(runtimeRules, role.Rules); diff != "" {
		t.Errorf("role rules (-want +got):\n%s", diff)
	}
	rb, ok := set.find("RoleBinding", "batchtune-trials").(*rbacv1.RoleBinding)
	if !ok {
		t.Fatal("no RoleBinding batchtune-trials")
	}
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name {
		t.Errorf("roleRef %+v, want the Role %s", rb.RoleRef, role.Name)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != "batchtune" || rb.Subjects[0].Namespace != runtimeNamespace {
		t.Errorf("subjects %+v, want the ServiceAccount batchtune of %s", rb.Subjects, runtimeNamespace)
	}
	if set.find("ServiceAccount", "batchtune") == nil {
		t.Error("the RoleBinding names a ServiceAccount that is not defined")
	}
	for name, pod := range runtimePods(t, set) {
		if pod.Spec.ServiceAccountName != "batchtune" {
			t.Errorf("%s: serviceAccountName %q, want batchtune", name, pod.Spec.ServiceAccountName)
		}
		if pod.Spec.AutomountServiceAccountToken == nil || !*pod.Spec.AutomountServiceAccountToken {
			t.Errorf("%s: the pod must mount its token: batchtune calls the API", name)
		}
	}
}

// runtimePods returns the pod templates of the Job, the CronJob and the
// Deployment.
func runtimePods(t testing.TB, set runtimeSet) map[string]corev1.PodTemplateSpec {
	t.Helper()
	job, ok1 := set.find("Job", "batchtune-tune").(*batchv1.Job)
	cj, ok2 := set.find("CronJob", "batchtune-nightly").(*batchv1.CronJob)
	dep, ok3 := set.find("Deployment", "batchtune-daemon").(*appsv1.Deployment)
	if !ok1 || !ok2 || !ok3 {
		t.Fatal("the Job, CronJob or Deployment is missing")
	}
	return map[string]corev1.PodTemplateSpec{
		"Job/" + job.Name: job.Spec.Template, "CronJob/" + cj.Name: cj.Spec.JobTemplate.Spec.Template, "Deployment/" + dep.Name: dep.Spec.Template,
	}
}

// TestRuntimePods: batchtune's own pods run its image, unprivileged (the
// restricted standard), with the store on a volume, and know their own
// pod through the downward API (trial pods are owned by that pod, so that
// the next batchtune pod collects those of a killed one).
func TestRuntimePods(t *testing.T) {
	set := runtimeManifests(t)
	for name, pod := range runtimePods(t, set) {
		s := pod.Spec
		if len(s.Containers) != 1 {
			t.Errorf("%s: %d containers, want batchtune alone", name, len(s.Containers))
			continue
		}
		c := s.Containers[0]
		if c.Image != set.image {
			t.Errorf("%s: image %q, want the kustomization's %q", name, c.Image, set.image)
		}
		if s.Hostname != "" {
			t.Errorf("%s: hostname %q: batchtune names its owner by the pod (POD_UID), a fixed host name is not needed", name, s.Hostname)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		for v, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid"} {
			if env[v] != field {
				t.Errorf("%s: %s is not the downward API's %s: a killed batchtune's trial pods could not be collected by the next pod", name, v, field)
			}
		}
		psc := s.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod security context %+v: want non-root with the runtime's seccomp profile", name, psc)
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container security context %+v: want no privilege escalation, a read-only root, no capabilities", name, sc)
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		vols := map[string]corev1.Volume{}
		for _, v := range s.Volumes {
			vols[v.Name] = v
		}
		state := vols[mounts["/var/lib/batchtune"]]
		if state.PersistentVolumeClaim == nil || set.find("PersistentVolumeClaim", state.PersistentVolumeClaim.ClaimName) == nil {
			t.Errorf("%s: /var/lib/batchtune is not on a PersistentVolumeClaim of the set (mounts %v)", name, mounts)
		}
		for _, a := range c.Args {
			for _, flag := range []string{"--db=", "--state-dir="} {
				if v, ok := strings.CutPrefix(a, flag); ok && !strings.HasPrefix(v, "/var/lib/batchtune/") {
					t.Errorf("%s: %s is not on the state volume", name, a)
				}
			}
		}
		if vols[mounts["/tmp"]].EmptyDir == nil {
			t.Errorf("%s: no writable /tmp (the root is read-only)", name)
		}
	}
}

// TestRuntimeJobAndCronJob: the CronJob's jobs are the one-shot Job, run
// nightly and never two at once; both tune the study of the ConfigMap.
func TestRuntimeJobAndCronJob(t *testing.T) {
	set := runtimeManifests(t)
	job := set.find("Job", "batchtune-tune").(*batchv1.Job)
	cj := set.find("CronJob", "batchtune-nightly").(*batchv1.CronJob)
	if !equality.Semantic.DeepEqual(job.Spec, cj.Spec.JobTemplate.Spec) {
		t.Errorf("the CronJob's jobTemplate.spec differs from the Job's spec (the cluster test runs the Job for both):\n%s", cmp.Diff(job.Spec, cj.Spec.JobTemplate.Spec))
	}
	if _, err := cron.ParseStandard(cj.Spec.Schedule); err != nil {
		t.Errorf("schedule: %v", err)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
	pod := job.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q, want Never", pod.RestartPolicy)
	}
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "tune" {
		t.Fatalf("args %q, want a one-shot tune", c.Args)
	}
	checkConfigMount(t, pod, c, "--config=", "batchtune-study")
}

// checkConfigMount checks that flag's path is in a volume of ConfigMap cm
// whose data has the file.
func checkConfigMount(t *testing.T, pod corev1.PodSpec, c corev1.Container, flag, cm string) {
	t.Helper()
	path := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flag); ok {
			path = v
		}
	}
	if path == "" {
		t.Fatalf("args %q: no %s", c.Args, flag)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != path && m.MountPath != filepath.Dir(path) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm {
				return
			}
		}
	}
	t.Errorf("%s%s is not in a volume of the ConfigMap %s", flag, path, cm)
}

// TestRuntimeStudies: the studies in the ConfigMaps pass batchtune's own
// validation, and the runtime accepts their trial pod; they name no
// kubeconfig or namespace (batchtune uses its pod's), and export onto the
// state volume.
func TestRuntimeStudies(t *testing.T) {
	set := runtimeManifests(t)
	for cmName, wantSchedule := range map[string]bool{"batchtune-study": false, "batchtune-daemon-studies": true} {
		cm, ok := set.find("ConfigMap", cmName).(*corev1.ConfigMap)
		if !ok || len(cm.Data) == 0 {
			t.Fatalf("no ConfigMap %s with a study", cmName)
		}
		for file, doc := range cm.Data {
			s, err := configs.ParseStudy(file, []byte(doc))
			if err != nil {
				t.Fatalf("%s %s: %v", cmName, file, err)
			}
			if err := s.Validate(tuner.SpaceCheck(4, 0)); err != nil {
				t.Fatalf("%s %s: %v", cmName, file, err)
			}
			k := s.Target.Kubernetes
			if s.Target.Runtime != configs.RuntimeKubernetes || k.Kubeconfig != "" || k.Namespace != "" || k.Context != "" {
				t.Errorf("%s %s: runtime %s, kubeconfig %q, context %q, namespace %q: want the kubernetes runtime with the pod's own config and namespace",
					cmName, file, s.Target.Runtime, k.Kubeconfig, k.Context, k.Namespace)
			}
			if !strings.HasPrefix(s.Export.Path, "/var/lib/batchtune/") {
				t.Errorf("%s %s: export %q is not on the state volume", cmName, file, s.Export.Path)
			}
			if got := s.Schedule.Cron != ""; got != wantSchedule {
				t.Errorf("%s %s: schedule.cron %q", cmName, file, s.Schedule.Cron)
			}
			opts, err := k8s.TargetOptions(s.Target, btruntime.Options{Study: s.Name})
			if err != nil {
				t.Fatalf("%s %s: %v", cmName, file, err)
			}
			opts.Client, opts.Namespace = fake.NewClientset(), runtimeNamespace
			if _, err := k8s.New(opts); err != nil {
				t.Errorf("%s %s: the runtime refuses the target: %v", cmName, file, err)
			}
		}
	}
	dep := set.find("Deployment", "batchtune-daemon").(*appsv1.Deployment)
	checkConfigMount(t, dep.Spec.Template.Spec, dep.Spec.Template.Spec.Containers[0], "--studies=", "batchtune-daemon-studies")
}

// TestRuntimeDaemon: one daemon on its store, its API beyond loopback
// behind a token from a Secret, probed on the open endpoints, and reached
// through the Service.
func TestRuntimeDaemon(t *testing.T) {
	set := runtimeManifests(t)
	dep := set.find("Deployment", "batchtune-daemon").(*appsv1.Deployment)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %v, strategy %q: want one daemon, replaced by Recreate (never two on one store)", dep.Spec.Replicas, dep.Spec.Strategy.Type)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "daemon" || !slices.Contains(c.Args, "--listen=0.0.0.0:8790") {
		t.Errorf("args %q: want batchtune daemon --listen=0.0.0.0:8790", c.Args)
	}
	tokenFile := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--token-file="); ok {
			tokenFile = v
		}
	}
	secret := ""
	for _, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(tokenFile) {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					secret = v.Secret.SecretName
					if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
						t.Errorf("the token's Secret volume is world-readable (defaultMode %v)", v.Secret.DefaultMode)
					}
				}
			}
		}
	}
	if tokenFile == "" || secret == "" {
		t.Errorf("--token-file=%q is not in a Secret's volume: the API beyond loopback needs a token", tokenFile)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz", p)
	}
	svc, ok := set.find("Service", "batchtune-daemon").(*corev1.Service)
	if !ok {
		t.Fatal("no Service batchtune-daemon")
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the daemon's pod does not carry", k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "api" || len(c.Ports) != 1 || c.Ports[0].Name != "api" {
		t.Errorf("Service ports %+v vs container ports %+v: want the named port api", svc.Spec.Ports, c.Ports)
	}
	if !slices.Contains(c.Args, "--allow-host="+svc.Name) {
		t.Errorf("args %q: the Service's name %s is not an allowed Host", c.Args, svc.Name)
	}
}
