package kubernetes

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/owner"
)

// Unit tests with client-go's fake clientset; the runtime against a real
// cluster is tested in conformance_test.go, failures_test.go and e2e_test.go.

func TestParseTemplateRefusesUnknownFieldsByName(t *testing.T) {
	_, err := ParseTemplate(map[string]any{"spec": map[string]any{"contianers": []any{}}})
	if err == nil || !strings.Contains(err.Error(), `"contianers"`) {
		t.Errorf("got %v, want the unknown field named", err)
	}
	_, err = ParseTemplate(map[string]any{"kind": "Deployment"})
	if err == nil || !strings.Contains(err.Error(), "spec.template") {
		t.Errorf("Deployment: got %v, want a pointer to its spec.template", err)
	}
	tmpl, err := ParseTemplate(map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"namespace": "ml", "labels": map[string]any{"team": "a"}},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"gpu": "h100"},
			"containers": []any{map[string]any{"name": "tfserving", "image": "tensorflow/serving:2.16.1-gpu",
				"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": 1}}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Namespace != "ml" || tmpl.Spec.NodeSelector["gpu"] != "h100" || tmpl.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", "").Value() != 1 {
		t.Errorf("template decoded as %+v", tmpl)
	}
}

func TestTemplateWithoutTFServingContainerIsRefused(t *testing.T) {
	two := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "sidecar", Image: "a"}, {Name: "server", Image: "b"},
	}}}
	_, err := New(Options{Client: fake.NewClientset(), Template: two})
	if err == nil || !strings.Contains(err.Error(), "no TF Serving container") || !strings.Contains(err.Error(), "sidecar, server") {
		t.Errorf("got %v, want no TF Serving container naming the containers", err)
	}
	_, err = New(Options{Client: fake.NewClientset(), Template: two, Container: "tfs"})
	if err == nil || !strings.Contains(err.Error(), `no container "tfs"`) {
		t.Errorf("got %v, want the missing container named", err)
	}
	if _, err := New(Options{Client: fake.NewClientset(), Template: two, Container: "server"}); err != nil {
		t.Errorf("container: server: %v", err)
	}
}

func TestTrialPodCarriesConfigFlagsAndLabels(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "tuner",
			Tolerations:        []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{
				{Name: "sidecar", Image: "s"},
				{Name: "tfserving", Image: "tfs", Args: []string{"--grpc_max_threads=8"},
					Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9000}}},
			},
		}}
	r, err := New(Options{Client: fake.NewClientset(), Namespace: "ml", Study: "my_study.v1", Template: tmpl,
		ModelName: "ranker", Args: []string{"--rest_api_timeout_in_ms=5000"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := runtime.Config{Batching: []byte("max_batch_size { value: 8 }\n"), IntraOpParallelism: 2, Flags: []string{"--x=1"}}
	cm, pod := r.objects("p1", cfg)
	if cm.Data[runtime.BatchingFile] != string(cfg.Batching) || !strings.Contains(cm.Data[runtime.MonitoringFile], "prometheus") {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
	c := pod.Spec.Containers[1]
	want := []string{"--grpc_max_threads=8", "--model_name=ranker", "--model_base_path=/models/ranker",
		"--rest_api_timeout_in_ms=5000", "--enable_batching", "--batching_parameters_file=/batchtune/batching.config"}
	for _, w := range want {
		if !slices.Contains(c.Args, w) {
			t.Errorf("args %q lack %q", c.Args, w)
		}
	}
	if c.Args[len(c.Args)-1] != "--x=1" {
		t.Errorf("the trial's flags come last: %q", c.Args)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.ServiceAccountName != "tuner" || len(pod.Spec.Tolerations) != 1 {
		t.Errorf("pod spec %+v", pod.Spec)
	}
	if len(pod.Spec.Containers[0].VolumeMounts) != 0 || c.VolumeMounts[0].MountPath != ConfigDir || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("the ConfigMap is mounted only in the TF Serving container, read-only: %+v", c.VolumeMounts)
	}
	if pod.Labels["team"] != "a" || pod.Labels[LabelStudy] != "my_study.v1" || pod.Labels[LabelRole] != RoleTrial ||
		pod.Labels[LabelRun] == "" || pod.Annotations[AnnotationOwner] == "" || pod.Namespace != "ml" {
		t.Errorf("pod meta %+v", pod.ObjectMeta)
	}
	if r.grpcPort != 9000 || r.restPort != DefaultRESTPort {
		t.Errorf("ports %d %d, want 9000 (named grpc) and 8501", r.grpcPort, r.restPort)
	}
}

func TestExitCarriesKubernetesReason(t *testing.T) {
	r, err := New(Options{Client: fake.NewClientset(), Image: "tfs"})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{rt: r}
	pod := func(st corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: DefaultContainer, State: st}}}}
	}
	e, ended := s.exitOf(pod(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}))
	if !ended || !e.OOMKilled || e.Code != 137 || !strings.Contains(e.Reason(), "OOM killer") {
		t.Errorf("OOMKilled: %+v %q", e, e.Reason())
	}
	e, ended = s.exitOf(pod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s"}}))
	if !ended || !strings.Contains(e.Reason(), "CrashLoopBackOff: back-off 10s") {
		t.Errorf("CrashLoopBackOff: ended %v %q", ended, e.Reason())
	}
	if _, ended := s.exitOf(pod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})); ended {
		t.Error("ContainerCreating counted as an end")
	}
	p := pod(corev1.ContainerState{})
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}}
	if got := r.pendingReason(p); !strings.Contains(got, "Insufficient nvidia.com/gpu") {
		t.Errorf("pendingReason %q", got)
	}
}

func TestRecoverCollectsOnlyWhatADeadBatchtuneLeft(t *testing.T) {
	host, _ := os.Hostname()
	obj := func(name, owner string) (*corev1.Pod, *corev1.ConfigMap) {
		meta := metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels:      map[string]string{LabelStudy: "s", LabelRole: RoleTrial, LabelRun: "old"},
			Annotations: map[string]string{AnnotationOwner: owner}}
		return &corev1.Pod{ObjectMeta: meta}, &corev1.ConfigMap{ObjectMeta: meta}
	}
	// A pid that never runs: pids are below pid_max, at most 2^22.
	deadPod, deadCM := obj("dead", "4194304@"+host)
	cli := fake.NewClientset(deadPod, deadCM)
	r, err := New(Options{Client: cli, Image: "tfs", Study: "s", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	pods, _ := cli.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	cms, _ := cli.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if len(pods.Items)+len(cms.Items) != 0 {
		t.Errorf("a dead batchtune's pod and ConfigMap are still there: %d %d", len(pods.Items), len(cms.Items))
	}
	r.Restore(ctx)

	livePod, liveCM := obj("live", "1@another-host")
	cli = fake.NewClientset(livePod, liveCM)
	r, _ = New(Options{Client: cli, Image: "tfs", Study: "s", StateDir: t.TempDir()})
	err = r.Recover(ctx)
	if !errors.Is(err, runtime.ErrBusy) || !strings.Contains(err.Error(), "another-host") {
		t.Errorf("Recover beside a live batchtune's pod: got %v, want ErrBusy naming its host", err)
	}
	if _, err := cli.CoreV1().Pods("default").Get(ctx, "live", metav1.GetOptions{}); err != nil {
		t.Errorf("a live batchtune's pod was touched: %v", err)
	}
	r.Restore(ctx)
}

func TestRecoverJudgesPodOwnersThroughTheAPI(t *testing.T) {
	t.Setenv(owner.EnvPodName, "batchtune-tune-new")
	t.Setenv(owner.EnvPodNamespace, "tuning")
	t.Setenv(owner.EnvPodUID, "u-self")
	runner := func(name, uid string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tuning", UID: types.UID(uid)},
			Status: corev1.PodStatus{Phase: phase}}
	}
	trial := func(name string, o owner.Pod) (*corev1.Pod, *corev1.ConfigMap) {
		meta := metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels:      map[string]string{LabelStudy: "s", LabelRole: RoleTrial, LabelRun: "old"},
			Annotations: map[string]string{AnnotationOwner: o.Label()}}
		return &corev1.Pod{ObjectMeta: meta}, &corev1.ConfigMap{ObjectMeta: meta}
	}
	ctx := context.Background()
	recoverWith := func(objs ...k8sruntime.Object) (*fake.Clientset, *Runtime, error) {
		cli := fake.NewClientset(objs...)
		r, err := New(Options{Client: cli, Image: "tfs", Study: "s", StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if want := (owner.Pod{Namespace: "tuning", Name: "batchtune-tune-new", UID: "u-self"}).Label(); r.owner != want {
			t.Fatalf("owner %q in a pod; want %q", r.owner, want)
		}
		return cli, r, r.Recover(ctx)
	}

	// Gone: succeeded, failed, missing, and a new pod of the same name.
	objs := []k8sruntime.Object{
		runner("done", "u-done", corev1.PodSucceeded),
		runner("failed", "u-failed", corev1.PodFailed),
		runner("renamed", "u-new", corev1.PodRunning),
	}
	for _, o := range []struct{ name, uid string }{{"done", "u-done"}, {"failed", "u-failed"},
		{"missing", "u-missing"}, {"renamed", "u-old"}, {"batchtune-tune-new", "u-self"}} {
		o := owner.Pod{Namespace: "tuning", Name: o.name, UID: o.uid}
		p, cm := trial("t-"+o.Name, o)
		objs = append(objs, p, cm)
	}
	cli, r, err := recoverWith(objs...)
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := cli.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	cms, _ := cli.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if len(pods.Items)+len(cms.Items) != 0 {
		t.Errorf("leftovers of pods that are gone are still there: %d pods, %d ConfigMaps", len(pods.Items), len(cms.Items))
	}
	if runners, _ := cli.CoreV1().Pods("tuning").List(ctx, metav1.ListOptions{}); len(runners.Items) != 3 {
		t.Errorf("the owner pods were touched: %d left", len(runners.Items))
	}
	r.Restore(ctx)

	// Live: running, and one being deleted within its grace period.
	stopping := runner("stopping", "u-stopping", corev1.PodRunning)
	stopping.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(time.Hour)}
	livePod, liveCM := trial("t-live", owner.Pod{Namespace: "tuning", Name: "live", UID: "u-live"})
	stoppingPod, _ := trial("t-stopping", owner.Pod{Namespace: "tuning", Name: "stopping", UID: "u-stopping"})
	cli, r, err = recoverWith(runner("live", "u-live", corev1.PodRunning), stopping, livePod, liveCM, stoppingPod)
	if !errors.Is(err, runtime.ErrBusy) || !strings.Contains(err.Error(), "pod tuning/live") || !strings.Contains(err.Error(), "pod tuning/stopping") {
		t.Errorf("Recover beside live batchtune pods: got %v, want ErrBusy naming both", err)
	}
	for _, name := range []string{"t-live", "t-stopping"} {
		if _, err := cli.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("a live batchtune's pod %s was touched: %v", name, err)
		}
	}
	r.Restore(ctx)

	// Not checkable (RBAC): counts as live.
	p, _ := trial("t-elsewhere", owner.Pod{Namespace: "other", Name: "x", UID: "u-x"})
	cli = fake.NewClientset(p)
	cli.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetNamespace() == "other" {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "x", errors.New("no RBAC"))
		}
		return false, nil, nil
	})
	r, _ = New(Options{Client: cli, Image: "tfs", Study: "s", StateDir: t.TempDir()})
	err = r.Recover(ctx)
	if !errors.Is(err, runtime.ErrBusy) || !strings.Contains(err.Error(), "not checked") || !strings.Contains(err.Error(), "other/x") {
		t.Errorf("Recover beside an owner pod it may not get: got %v, want ErrBusy saying so", err)
	}
	if _, err := cli.CoreV1().Pods("default").Get(ctx, "t-elsewhere", metav1.GetOptions{}); err != nil {
		t.Errorf("an unchecked owner's pod was touched: %v", err)
	}
	r.Restore(ctx)
}

// TestTrialPodPlacement: spread node keeps the run's trial pods on
// different nodes (a required anti-affinity to the run's own trial pods,
// by hostname), spread none adds nothing, and a pinned node is ANDed into
// every one of the template's own node selector terms.
func TestTrialPodPlacement(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"a100"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}}},
			}}}},
		Containers: []corev1.Container{{Name: "tfserving", Image: "tfs"}},
	}}
	r, err := New(Options{Client: fake.NewClientset(), Template: tmpl, Study: "s"})
	if err != nil {
		t.Fatal(err)
	}
	_, pod := r.objects("p1", runtime.Config{})
	aa := pod.Spec.Affinity.PodAntiAffinity
	if aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("spread node (the default): anti-affinity %+v, want one required term", aa)
	}
	term := aa.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != HostnameKey || term.LabelSelector.MatchLabels[LabelRun] != r.run || term.LabelSelector.MatchLabels[LabelRole] != RoleTrial {
		t.Errorf("anti-affinity term %+v, want the run's trial pods by hostname", term)
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 || len(terms[0].MatchFields) != 0 {
		t.Errorf("no node pinned: the template's node terms changed: %+v", terms)
	}
	if len(tmpl.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields) != 0 {
		t.Error("objects changed the template itself")
	}

	_, pod = r.objects("p2", runtime.Config{Node: "node-7"})
	terms = pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 {
		t.Fatalf("pinned: %d node selector terms, want the template's 2 (a third would widen them)", len(terms))
	}
	for i, nt := range terms {
		if len(nt.MatchExpressions) != 1 || len(nt.MatchFields) != 1 || nt.MatchFields[0].Key != "metadata.name" || nt.MatchFields[0].Values[0] != "node-7" {
			t.Errorf("term %d: %+v, want the template's expression AND metadata.name in [node-7]", i, nt)
		}
	}

	r2, err := New(Options{Client: fake.NewClientset(), Image: "tfs", Study: "s", Spread: SpreadNone})
	if err != nil {
		t.Fatal(err)
	}
	if _, pod := r2.objects("p3", runtime.Config{}); pod.Spec.Affinity != nil {
		t.Errorf("spread none, no node: affinity %+v, want none", pod.Spec.Affinity)
	}
	if _, err := New(Options{Client: fake.NewClientset(), Image: "tfs", Spread: "zone"}); err == nil || !strings.Contains(err.Error(), "spread") {
		t.Errorf("spread zone: got %v, want refused naming spread", err)
	}
}

// TestOrphansAcrossStudies: cleanup's listing finds the trial objects of
// every study whose batchtune is gone (a dead pid here; a batchtune pod
// that no longer exists), removes them only when asked, and leaves a live
// owner's and other namespaces' alone.
func TestOrphansAcrossStudies(t *testing.T) {
	host, _ := os.Hostname()
	obj := func(ns, name, study, own string) (*corev1.Pod, *corev1.ConfigMap) {
		meta := metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{LabelStudy: study, LabelRole: RoleTrial, LabelRun: "r"},
			Annotations: map[string]string{AnnotationOwner: own, AnnotationStudy: study}}
		return &corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, &corev1.ConfigMap{ObjectMeta: meta}
	}
	deadP, deadC := obj("ml", "a-1", "a", "4194304@"+host)
	goneP, goneC := obj("ml", "b-1", "b", owner.Pod{Namespace: "ml", Name: "batchtune-job-x", UID: "u1"}.Label())
	liveP, liveC := obj("ml", "c-1", "c", "1@another-host")
	elseP, elseC := obj("other", "d-1", "d", "4194304@"+host)
	cli := fake.NewClientset(deadP, deadC, goneP, goneC, liveP, liveC, elseP, elseC)
	ctx := context.Background()

	got, err := Orphans(ctx, cli, "ml", false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range got {
		names = append(names, o.Kind+" "+o.Name+" "+o.Study)
	}
	want := []string{"pod a-1 a", "pod b-1 b", "configmap a-1 a", "configmap b-1 b"}
	if !slices.Equal(names, want) {
		t.Errorf("orphans %q, want %q", names, want)
	}
	if pods, _ := cli.CoreV1().Pods("ml").List(ctx, metav1.ListOptions{}); len(pods.Items) != 3 {
		t.Errorf("a dry run removed pods: %d left of 3", len(pods.Items))
	}
	if _, err := Orphans(ctx, cli, "ml", true); err != nil {
		t.Fatal(err)
	}
	pods, _ := cli.CoreV1().Pods("ml").List(ctx, metav1.ListOptions{})
	cms, _ := cli.CoreV1().ConfigMaps("ml").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 1 || pods.Items[0].Name != "c-1" || len(cms.Items) != 1 || cms.Items[0].Name != "c-1" {
		t.Errorf("after removal: pods %d, configmaps %d; want only the live owner's c-1 of each", len(pods.Items), len(cms.Items))
	}
	if _, err := cli.CoreV1().Pods("other").Get(ctx, "d-1", metav1.GetOptions{}); err != nil {
		t.Errorf("another namespace was touched: %v", err)
	}
}
