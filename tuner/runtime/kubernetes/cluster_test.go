package kubernetes_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	k8s "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
	"github.com/batchtune/batchtune/tuner/runtime/kubernetes/kubetest"
)

// EnvKubeconfig names the kubeconfig of the test cluster (kubetest's rule).
const EnvKubeconfig = kubetest.EnvKubeconfig

// testNamespace holds every test pod.
const testNamespace = "default"

// cluster returns a client for the test cluster: kubetest.Cluster, which
// skips the test when none is given, or fails it under
// BATCHTUNE_REQUIRE_TOOLS=1.
func cluster(t testing.TB) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	return kubetest.Cluster(t)
}

// standInTemplate is a trial pod running the stand-in image with the
// given model (bundled in the image under /models).
func standInTemplate(image string, extra func(*corev1.PodTemplateSpec)) *corev1.PodTemplateSpec {
	t := &corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{
				Name:            "tfserving",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("512Mi"),
				}},
			}},
		},
	}
	if extra != nil {
		extra(t)
	}
	return t
}

// studyFor names the study of a state dir: two runtimes on one state dir
// are the same study, as the conformance suite expects.
func studyFor(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return "t-" + hex.EncodeToString(sum[:5])
}

// newRuntime makes a runtime on the test cluster with the stand-in.
func newRuntime(t testing.TB, cli kubernetes.Interface, stateDir string, edit func(*k8s.Options)) *k8s.Runtime {
	t.Helper()
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	o := k8s.Options{
		Client:         cli,
		Namespace:      testNamespace,
		Study:          studyFor(stateDir),
		StateDir:       stateDir,
		Template:       standInTemplate(si.Image, nil),
		ModelName:      si.Model,
		PendingTimeout: 60 * time.Second,
		StopGrace:      2 * time.Second,
	}
	if edit != nil {
		edit(&o)
	}
	rt, err := k8s.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// leftovers lists the pods and ConfigMaps of stateDir's study.
func leftovers(t testing.TB, cli kubernetes.Interface, stateDir string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: k8s.LabelStudy + "=" + studyFor(stateDir)}
	var out []string
	pods, err := cli.CoreV1().Pods(testNamespace).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	cms, err := cli.CoreV1().ConfigMaps(testNamespace).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		out = append(out, "configmap/"+c.Name)
	}
	return out
}

// killContainer SIGKILLs the server's container processes on this node
// (the test cluster is this machine), as the OOM killer would: found by
// the container's ID in their cgroup.
func killContainer(t testing.TB, cli kubernetes.Interface, srv runtime.Server) {
	t.Helper()
	name, _, ok := k8s.PodName(srv)
	if !ok {
		t.Fatal("not a kubernetes server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := cli.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "tfserving" {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if id == "" {
		t.Fatalf("pod %s: no container ID in %+v", name, p.Status.ContainerStatuses)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	killed := 0
	for _, f := range procs {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), id) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("no process of container %s found on this machine", id)
	}
}
