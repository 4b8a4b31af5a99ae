// Package kubetest is what tests on the test cluster share: the rule that
// finds it (BATCHTUNE_K8S_KUBECONFIG; skipped when unset, a failure when
// BATCHTUNE_REQUIRE_TOOLS is set) and the client made from it. The runtime's
// own tests and deploy/'s manifest tests use it. It is for tests only.
package kubetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// EnvKubeconfig names the kubeconfig of the test cluster
// (deploy/kubernetes/cluster/up.sh prints it). The tests use only this
// variable, never KUBECONFIG, so that they cannot touch a user's cluster.
const EnvKubeconfig = "BATCHTUNE_K8S_KUBECONFIG"

// EnvRequireTools, when set, turns a missing cluster into a failure (CI,
// make test).
const EnvRequireTools = "BATCHTUNE_REQUIRE_TOOLS"

var (
	once sync.Once
	cfg  *rest.Config
	cli  kubernetes.Interface
	err  error
)

// Cluster returns a client for the test cluster, skipping the test when
// none is given, or failing it under BATCHTUNE_REQUIRE_TOOLS (as CI runs).
// A cluster that is given but does not answer is a failure.
func Cluster(t testing.TB) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	kc := os.Getenv(EnvKubeconfig)
	if kc == "" {
		msg := "no test cluster: " + EnvKubeconfig + " is not set (deploy/kubernetes/cluster/up.sh brings one up and prints it)"
		if os.Getenv(EnvRequireTools) != "" {
			t.Fatal(msg + " and " + EnvRequireTools + " is set")
		}
		t.Skip(msg)
	}
	once.Do(func() {
		cfg, err = clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			return
		}
		cli, err = kubernetes.NewForConfig(cfg)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = cli.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
	})
	if err != nil {
		t.Fatalf("test cluster %s: %v", kc, err)
	}
	return cli, cfg
}

// Study is what the cluster tests' studies of the stand-in's ranker model
// vary; StandInStudy writes the rest the same way for all of them.
type Study struct {
	Name  string
	Image string // the stand-in's image, as up.sh imported it
	// Kubeconfig and Namespace go into target.kubernetes when set; empty,
	// batchtune uses its in-cluster configuration and its own namespace.
	Kubeconfig, Namespace string
	// Spread is target.kubernetes.spread when set.
	Spread string
	// Duration is each trial's measuring time (min and max); default 2s.
	Duration string
	// Rest is the sections after slo and objective: space, search and any
	// other, as YAML at the top level.
	Rest string
}

// StandInStudy returns a short study of the stand-in's ranker on the
// cluster: one trial pod per configuration from a template as a user writes
// it, 16 closed-loop clients, P99 within 200 ms.
func StandInStudy(s Study) string {
	var where string
	if s.Kubeconfig != "" {
		where += "    kubeconfig: " + s.Kubeconfig + "\n"
	}
	if s.Namespace != "" {
		where += "    namespace: " + s.Namespace + "\n"
	}
	if s.Spread != "" {
		where += "    spread: " + s.Spread + "\n"
	}
	dur := s.Duration
	if dur == "" {
		dur = "2s"
	}
	return fmt.Sprintf(`name: %s
target:
  runtime: kubernetes
  model: {name: ranker, base_path: /models/ranker}
  start_timeout: 60s
  kubernetes:
%s    pending_timeout: 60s
    template:
      metadata:
        labels: {app: tfserving-trial}
      spec:
        automountServiceAccountToken: false
        containers:
          - name: tfserving
            image: %s
            imagePullPolicy: Never
            resources:
              limits: {memory: 512Mi}
load:
  mode: closed
  concurrency: 16
  connections: 2
  request_timeout: 2s
  payload:
    batch: 1
    inputs: [{name: features, dtype: DT_FLOAT, shape: [-1, 256]}]
  warmup: {requests: 50, max_duration: 3s}
  min_duration: %s
  max_duration: %s
slo:
  latency: 200ms
objective: max_throughput
%s`, s.Name, where, s.Image, dur, dur, s.Rest)
}
