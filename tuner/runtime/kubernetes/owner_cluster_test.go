package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/owner"
	k8s "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
)

// pauseImage is the test cluster's pod sandbox image
// (deploy/kubernetes/cluster/up.sh): a process that waits for SIGTERM.
const pauseImage = "localhost/batchtune-pause:dev"

func pausePod(name string, meta func(*metav1.ObjectMeta)) *corev1.Pod {
	grace := int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  new(bool),
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "pause", Image: pauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
	if meta != nil {
		meta(&p.ObjectMeta)
	}
	return p
}

func deleteNow(cli kubernetes.Interface, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	cli.CoreV1().Pods(testNamespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	for {
		if _, err := cli.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A batchtune that ran in a pod owns its trial pods by that pod: while the
// pod runs they are left alone (and named), once it is gone the next
// batchtune, in another pod or none, collects them.
func TestRecoverJudgesPodOwnersOnTheCluster(t *testing.T) {
	cli, _ := cluster(t)
	for _, e := range []string{owner.EnvPodName, owner.EnvPodNamespace, owner.EnvPodUID} {
		t.Setenv(e, "") // this test's batchtune is not in a pod
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e6)
	ownerName := "bt-owner-" + suffix
	created, err := cli.CoreV1().Pods(testNamespace).Create(ctx, pausePod(ownerName, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer deleteNow(cli, ownerName)
	for {
		p, err := cli.CoreV1().Pods(testNamespace).Get(ctx, ownerName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			break
		}
		if ctx.Err() != nil || p.Status.Phase == corev1.PodFailed {
			t.Fatalf("owner pod not running: %+v", p.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}

	stateDir := t.TempDir()
	study := studyFor(stateDir)
	label := owner.Pod{Namespace: testNamespace, Name: ownerName, UID: string(created.UID)}.Label()
	leftName := "bt-left-" + suffix
	left := pausePod(leftName, func(m *metav1.ObjectMeta) {
		m.Labels = map[string]string{k8s.LabelStudy: study, k8s.LabelRole: k8s.RoleTrial, k8s.LabelRun: "old"}
		m.Annotations = map[string]string{k8s.AnnotationOwner: label}
	})
	if _, err := cli.CoreV1().Pods(testNamespace).Create(ctx, left, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer deleteNow(cli, leftName)
	cm := &corev1.ConfigMap{ObjectMeta: left.ObjectMeta}
	if _, err := cli.CoreV1().ConfigMaps(testNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cli.CoreV1().ConfigMaps(testNamespace).Delete(context.Background(), leftName, metav1.DeleteOptions{})

	newRT := func() *k8s.Runtime {
		rt, err := k8s.New(k8s.Options{Client: cli, Namespace: testNamespace, Study: study, StateDir: stateDir, Image: pauseImage})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	// The owner pod runs: its trial pod is not touched, and is named.
	rt := newRT()
	err = rt.Recover(ctx)
	if !errors.Is(err, runtime.ErrBusy) || !strings.Contains(err.Error(), leftName) || !strings.Contains(err.Error(), "pod "+testNamespace+"/"+ownerName) {
		t.Errorf("Recover beside a live owner pod: got %v, want ErrBusy naming the trial pod and its owner", err)
	}
	rt.Restore(ctx)
	if got := leftovers(t, cli, stateDir); len(got) != 2 {
		t.Fatalf("a live owner's objects were touched: %q left", got)
	}

	// The owner pod is gone (killed, its node lost): they are collected.
	deleteNow(cli, ownerName)
	rt = newRT()
	if err := rt.Recover(ctx); err != nil {
		t.Fatalf("Recover after the owner pod is gone: %v", err)
	}
	if got := leftovers(t, cli, stateDir); len(got) != 0 {
		t.Errorf("left after Recover: %q", got)
	}
	if err := rt.Restore(ctx); err != nil {
		t.Error(err)
	}
}
