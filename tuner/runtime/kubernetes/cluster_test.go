package kubernetes_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	k8s "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
)

// EnvKubeconfig names the kubeconfig of the test cluster
// (deploy/kubernetes/cluster/up.sh prints it). The tests use only this
// variable, never KUBECONFIG, so that they cannot touch a user's cluster.
const EnvKubeconfig = "BATCHTUNE_K8S_KUBECONFIG"

// testNamespace holds every test pod.
const testNamespace = "default"

var (
	clusterOnce sync.Once
	clusterCfg  *rest.Config
	clusterCli  kubernetes.Interface
	clusterErr  error
)

// cluster returns a client for the test cluster, skipping the test when
// none is given, or failing it under BATCHTUNE_REQUIRE_TOOLS=1 (as CI
// runs). A cluster that is given but does not answer is a failure.
func cluster(t testing.TB) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	kc := os.Getenv(EnvKubeconfig)
	if kc == "" {
		msg := "no test cluster: " + EnvKubeconfig + " is not set (deploy/kubernetes/cluster/up.sh brings one up and prints it)"
		if os.Getenv("BATCHTUNE_REQUIRE_TOOLS") != "" {
			t.Fatal(msg + " and BATCHTUNE_REQUIRE_TOOLS is set")
		}
		t.Skip(msg)
	}
	clusterOnce.Do(func() {
		clusterCfg, clusterErr = clientcmd.BuildConfigFromFlags("", kc)
		if clusterErr != nil {
			return
		}
		clusterCli, clusterErr = kubernetes.NewForConfig(clusterCfg)
		if clusterErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, clusterErr = clusterCli.CoreV1().Namespaces().Get(ctx, testNamespace, metav1.GetOptions{})
	})
	if clusterErr != nil {
		t.Fatalf("test cluster %s: %v", kc, clusterErr)
	}
	return clusterCli, clusterCfg
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
