package kubernetes_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	k8s "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
)

// startFails starts one trial that must fail, and checks that the error
// says want and that nothing is left in the cluster afterwards.
func startFails(t *testing.T, cli kubernetes.Interface, edit func(*k8s.Options), want ...string) error {
	t.Helper()
	dir := t.TempDir()
	rt := newRuntime(t, cli, dir, edit)
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	srv, err := rt.Start(ctx, runtime.Config{Batching: si.Good})
	took := time.Since(began)
	if err == nil {
		srv.Stop(ctx)
		t.Fatalf("Start succeeded, want a failure saying %q", want)
	}
	t.Logf("Start failed after %v: %v", took.Round(time.Millisecond), err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if err := rt.Restore(ctx); err != nil {
		t.Errorf("Restore: %v", err)
	}
	if left := leftovers(t, cli, dir); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	return err
}

// TestUnschedulableFailsWithTheSchedulersMessage: a pod asking for a GPU
// the node lacks stays Pending; the trial fails at pending_timeout with
// the scheduler's reason.
func TestUnschedulableFailsWithTheSchedulersMessage(t *testing.T) {
	cli, _ := cluster(t)
	startFails(t, cli, func(o *k8s.Options) {
		o.PendingTimeout = 4 * time.Second
		c := &o.Template.Spec.Containers[0]
		c.Resources.Limits["nvidia.com/gpu"] = resource.MustParse("1")
	}, "pending_timeout", "Unschedulable", "nvidia.com/gpu")
}

// TestMissingImageFailsAtOnce: an image the node does not have, with
// imagePullPolicy Never, fails with Kubernetes' reason, well before the
// pending deadline.
func TestMissingImageFailsAtOnce(t *testing.T) {
	cli, _ := cluster(t)
	startFails(t, cli, func(o *k8s.Options) {
		o.PendingTimeout = 5 * time.Minute
		o.Image = "localhost/batchtune-no-such-image:absent"
	}, "ErrImageNeverPull", "batchtune-no-such-image")
}

// TestContainerThatExitsIsReported: a container that ends on its own
// (the stand-in asked for its version) ends the Server with its exit code
// and log, not stopped by batchtune.
func TestContainerThatExitsIsReported(t *testing.T) {
	cli, _ := cluster(t)
	dir := t.TempDir()
	rt := newRuntime(t, cli, dir, func(o *k8s.Options) {
		o.Args = []string{"--version"}
	})
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Restore(ctx); err != nil {
			t.Errorf("Restore: %v", err)
		}
		if left := leftovers(t, cli, dir); len(left) > 0 {
			t.Errorf("left behind: %q", left)
		}
	}()
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	srv, err := rt.Start(ctx, runtime.Config{Batching: si.Good})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = runtime.WaitPorts(wctx, srv)
	var ee *runtime.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("WaitPorts: got %v, want an *ExitError", err)
	}
	e := ee.Exit
	if e.Code != 0 || e.Stopped || !strings.Contains(e.Log, "TensorFlow ModelServer") {
		t.Errorf("Exit: code %d stopped %v log %q; want code 0, not stopped, the version in the log", e.Code, e.Stopped, e.Log)
	}
}

// TestForbiddenIsReported: a user whose Role may read and delete pods and
// ConfigMaps but not create them fails the trial with the API's reason;
// one that may not even list them is refused at Recover.
func TestForbiddenIsReported(t *testing.T) {
	cli, cfg := cluster(t)
	ctx := context.Background()
	user := "batchtune-test-readonly"
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: testNamespace},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"pods", "configmaps", "pods/log"},
			Verbs: []string{"get", "list", "watch", "delete"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: testNamespace},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user, APIGroup: rbacv1.GroupName}},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: user, APIGroup: rbacv1.GroupName},
	}
	rbac := cli.RbacV1().Roles(testNamespace)
	rbac.Delete(ctx, user, metav1.DeleteOptions{})
	cli.RbacV1().RoleBindings(testNamespace).Delete(ctx, user, metav1.DeleteOptions{})
	if _, err := rbac.Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rbac.Delete(context.Background(), user, metav1.DeleteOptions{}) })
	if _, err := cli.RbacV1().RoleBindings(testNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.RbacV1().RoleBindings(testNamespace).Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	as := func(name string) kubernetes.Interface {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: name}
		return kubernetes.NewForConfigOrDie(c)
	}

	t.Run("MayNotCreatePods", func(t *testing.T) {
		readonly := as(user)
		// RBAC changes reach the authorizer's cache within moments.
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := readonly.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{Limit: 1})
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		startFails(t, cli, func(o *k8s.Options) { o.Client = readonly },
			"forbidden", `cannot create resource "configmaps"`, user)
	})
	t.Run("MayNotListPods", func(t *testing.T) {
		rt := newRuntime(t, as("batchtune-test-nobody"), t.TempDir(), nil)
		err := rt.Recover(ctx)
		if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "batchtune-test-nobody") {
			t.Errorf("Recover as a user without rights: got %v, want forbidden naming the user", err)
		}
		rt.Restore(ctx)
	})
}

// TestPlacementOnTheCluster checks the pod placement rules against the
// real scheduler: a trial pinned to the node runs there and reports it; one
// pinned to a node that does not exist fails with the scheduler's reason;
// with spread node, a second slot's pod cannot join the first on the
// cluster's only node, and fails with the anti-affinity named; with spread
// none it starts beside it.
func TestPlacementOnTheCluster(t *testing.T) {
	cli, _ := cluster(t)
	ctx := context.Background()
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	dir := t.TempDir()
	rt := newRuntime(t, cli, dir, func(o *k8s.Options) { o.PendingTimeout = 5 * time.Second })
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Restore(ctx)
	first, err := rt.StartSlot(ctx, 0, runtime.Config{Batching: si.Good})
	if err != nil {
		t.Fatal(err)
	}
	node := first.(runtime.Placed).Node()
	if node == "" {
		t.Fatal("a started trial pod reports no node")
	}
	// Spread node (the default): slot 1 may not share the node.
	_, err = rt.StartSlot(ctx, 1, runtime.Config{Batching: si.Good})
	if err == nil || !strings.Contains(err.Error(), "anti-affinity") {
		t.Errorf("second slot beside the first with spread node: got %v, want the scheduler's anti-affinity reason", err)
	}
	first.Stop(ctx)

	// Pinned to the node: it runs there (the first pod is gone, so the
	// anti-affinity allows it).
	pinned, err := rt.StartSlot(ctx, 0, runtime.Config{Batching: si.Good, Node: node})
	if err != nil {
		t.Fatalf("pinned to %s: %v", node, err)
	}
	if got := pinned.(runtime.Placed).Node(); got != node {
		t.Errorf("pinned to %s, ran on %s", node, got)
	}
	pinned.Stop(ctx)
	_, err = rt.StartSlot(ctx, 0, runtime.Config{Batching: si.Good, Node: "batchtune-no-such-node"})
	if err == nil || !strings.Contains(err.Error(), "Unschedulable") || !strings.Contains(err.Error(), "NodeAffinity") {
		t.Errorf("pinned to a node that does not exist: got %v, want the scheduler's node-affinity reason", err)
	}
	if err := rt.Restore(ctx); err != nil {
		t.Errorf("Restore: %v", err)
	}
	if left := leftovers(t, cli, dir); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}

	// Spread none: two slots side by side on the one node.
	dir2 := t.TempDir()
	rt2 := newRuntime(t, cli, dir2, func(o *k8s.Options) { o.Spread = k8s.SpreadNone })
	if err := rt2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt2.Restore(ctx)
	var srvs []runtime.Server
	for slot := range 2 {
		srv, err := rt2.StartSlot(ctx, slot, runtime.Config{Batching: si.Good})
		if err != nil {
			t.Fatalf("spread none, slot %d: %v", slot, err)
		}
		srvs = append(srvs, srv)
	}
	if a, b := srvs[0].Endpoints().GRPC, srvs[1].Endpoints().GRPC; a == b {
		t.Errorf("two slots share one endpoint %s", a)
	}
	if err := rt2.Restore(ctx); err != nil {
		t.Errorf("Restore: %v", err)
	}
	if left := leftovers(t, cli, dir2); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
}
