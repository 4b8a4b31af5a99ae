package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	k8s "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
	"github.com/batchtune/batchtune/tuner/runtime/kubernetes/kubetest"
)

// standInImage is the TF Serving stand-in that
// deploy/kubernetes/cluster/up.sh imports into the cluster.
func standInImage() string {
	if img := os.Getenv("BATCHTUNE_STANDIN_IMAGE"); img != "" {
		return img
	}
	return "localhost/tfs-emulator:dev"
}

// clusterStudy is a short study of the stand-in's ranker model: two
// trials and a confirmation, a few seconds each, the trial pods as a user
// writes them (no namespace: batchtune's own).
func clusterStudy(name, schedule string) string {
	s := kubetest.StandInStudy(kubetest.Study{Name: name, Image: standInImage(), Rest: `space:
  max_batch_size: {values: [4, 32]}
  batch_timeout_micros: {values: [1000]}
  num_batch_threads: {values: [2]}
  max_enqueued_batches: {values: [16]}
search: {strategy: grid, trials: 2}
confirmation: {top_k: 1, repeats: 2, max_repeats: 2}
export:
  path: /var/lib/batchtune/` + name + `.batching.config
`})
	if schedule != "" {
		s += "schedule: {cron: \"" + schedule + "\", time_zone: UTC, trials: 2}\n"
	}
	return s
}

// buildImage builds batchtune's image and imports it into the cluster when
// it is missing or outdated (kubernetes/runtime/image.sh).
func buildImage(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("./image.sh")
	cmd.Dir = runtimeDir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s/image.sh: %v", runtimeDir, err)
	}
	return strings.TrimSpace(string(out))
}

// TestRuntimeManifestsOnCluster applies deploy/kubernetes/runtime to the
// test cluster, in a namespace of its own, with only the namespace and the
// studies changed (a short study on the stand-in): the Job runs a whole
// study as the namespaced ServiceAccount, each trial a pod, and leaves a
// recommendation on its volume and nothing else behind; the CronJob is
// accepted and a job from it passes the API server's checks (dry run: it
// is the Job, TestRuntimeJobAndCronJob says); the daemon becomes Available
// and answers on its pod IP and its Service, with the token rules.
func TestRuntimeManifestsOnCluster(t *testing.T) {
	cli, _ := kubetest.Cluster(t)
	set := runtimeManifests(t)
	if img := buildImage(t); img != set.image {
		t.Fatalf("image.sh built %q, the manifests run %q", img, set.image)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// The state volumes: this host's directories (the cluster is this
	// machine and has no provisioner), bound to the claims of the set.
	dirs := map[string]string{}
	for _, o := range set.objs {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok {
			dir := t.TempDir()
			if err := os.Chown(dir, 65532, 65532); err != nil {
				t.Fatal(err)
			}
			dirs[pvc.Name] = dir
		}
	}
	ns := "bt-deploy-" + randomHex(4)
	var pvs []string
	t.Cleanup(func() { removeNamespace(t, cli, ns, pvs) })
	nsObj := set.find("Namespace", runtimeNamespace).(*corev1.Namespace).DeepCopy()
	nsObj.ObjectMeta = metav1.ObjectMeta{Name: ns, Labels: nsObj.Labels}
	if _, err := cli.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for claim, dir := range dirs {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: ptr(corev1.HostPathDirectory),
				}},
			},
		}
		if _, err := cli.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pvs = append(pvs, pv.Name)
	}
	token := randomHex(16)
	if _, err := cli.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "batchtune-api-token"},
		StringData: map[string]string{"token": token},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Apply: the namespace rewritten, and the studies.
	studies := map[string]map[string]string{
		"batchtune-study":          {"study.yaml": clusterStudy("deploy-e2e", "")},
		"batchtune-daemon-studies": {"deploy-e2e-daemon.yaml": clusterStudy("deploy-e2e-daemon", "0 3 * * *")},
	}
	var cronJob *batchv1.CronJob
	began := time.Now()
	for _, o := range set.objs {
		o = o.DeepCopyObject()
		if m, ok := metaOf(o); ok {
			m.SetNamespace(ns)
		}
		switch v := o.(type) {
		case *corev1.Namespace:
			continue
		case *rbacv1.RoleBinding:
			for i := range v.Subjects {
				v.Subjects[i].Namespace = ns
			}
		case *corev1.ConfigMap:
			if d, ok := studies[v.Name]; ok {
				v.Data = d
			}
		case *batchv1.CronJob:
			cronJob = v
		}
		if err := create(ctx, cli, ns, o, false); err != nil {
			t.Fatalf("applying %s: %v", describe(o), err)
		}
	}

	// The CronJob: a job made from it as kubectl create job --from does,
	// checked by the API server (admission, pod security) without running.
	fromCron := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batchtune-nightly-manual", Namespace: ns,
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}},
		Spec: cronJob.Spec.JobTemplate.Spec,
	}
	if err := create(ctx, cli, ns, fromCron, true); err != nil {
		t.Errorf("a job from the CronJob (server dry run): %v", err)
	}

	// The Job: the whole study, each trial a pod.
	job := waitJob(ctx, t, cli, ns, "batchtune-tune")
	logs := podLogs(ctx, t, cli, ns, "batch.kubernetes.io/job-name="+job.Name)
	t.Logf("the Job took %v; its log:\n%s", job.Status.CompletionTime.Sub(job.Status.StartTime.Time).Round(time.Second), logs)
	m := regexp.MustCompile(`study deploy-e2e, run \d+ \((\w+)\): (\d+) trials`).FindStringSubmatch(logs)
	if m == nil {
		t.Errorf("the Job's log has no study summary")
	} else if n, _ := strconv.Atoi(m[2]); m[1] != "finished" || n < 3 {
		t.Errorf("run %s with %s trials, want finished with the 2 searched and at least 1 confirmation", m[1], m[2])
	}
	if !strings.Contains(logs, "\nrecommended: ") {
		t.Error("the Job's log has no recommendation")
	}
	export, err := os.ReadFile(filepath.Join(dirs["batchtune-state"], "deploy-e2e.batching.config"))
	if err != nil || !strings.Contains(string(export), "max_batch_size") {
		t.Errorf("the recommendation on the state volume: %v %q", err, export)
	}
	if left := trialObjects(ctx, t, cli, ns); len(left) > 0 {
		t.Errorf("left in the namespace after the Job: %q", left)
	}
	checkNamespacedRole(ctx, t, cli, ns)

	// The daemon: Available, its API on the pod IP and behind the Service.
	checkDaemon(ctx, t, cli, ns, token)
	t.Logf("applied and exercised in %v", time.Since(began).Round(time.Second))
}

func ptr[T any](v T) *T { return &v }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func describe(o k8sruntime.Object) string {
	m, _ := metaOf(o)
	return fmt.Sprintf("%T %s", o, m.GetName())
}

// create makes o in namespace ns, or with dryRun has the API server check
// it without keeping it.
func create(ctx context.Context, cli kubernetes.Interface, ns string, o k8sruntime.Object, dryRun bool) error {
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var err error
	switch v := o.(type) {
	case *corev1.ServiceAccount:
		_, err = cli.CoreV1().ServiceAccounts(ns).Create(ctx, v, opts)
	case *rbacv1.Role:
		_, err = cli.RbacV1().Roles(ns).Create(ctx, v, opts)
	case *rbacv1.RoleBinding:
		_, err = cli.RbacV1().RoleBindings(ns).Create(ctx, v, opts)
	case *corev1.ConfigMap:
		_, err = cli.CoreV1().ConfigMaps(ns).Create(ctx, v, opts)
	case *corev1.PersistentVolumeClaim:
		_, err = cli.CoreV1().PersistentVolumeClaims(ns).Create(ctx, v, opts)
	case *corev1.Service:
		_, err = cli.CoreV1().Services(ns).Create(ctx, v, opts)
	case *appsv1.Deployment:
		_, err = cli.AppsV1().Deployments(ns).Create(ctx, v, opts)
	case *batchv1.Job:
		_, err = cli.BatchV1().Jobs(ns).Create(ctx, v, opts)
	case *batchv1.CronJob:
		_, err = cli.BatchV1().CronJobs(ns).Create(ctx, v, opts)
	default:
		err = fmt.Errorf("the test does not apply a %T", o)
	}
	return err
}

// waitJob waits for the Job to succeed; a failure ends the test with its
// pod's log.
func waitJob(ctx context.Context, t *testing.T, cli kubernetes.Interface, ns, name string) *batchv1.Job {
	t.Helper()
	for {
		job, err := cli.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("job %s: %v", name, err)
		}
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return job
			case batchv1.JobFailed:
				t.Fatalf("job %s failed: %s: %s; its log:\n%s", name, c.Reason, c.Message, podLogs(context.Background(), t, cli, ns, "batch.kubernetes.io/job-name="+name))
			}
		}
		select {
		case <-ctx.Done():
			pods, _ := cli.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			var states []string
			for _, p := range pods.Items {
				states = append(states, p.Name+" "+string(p.Status.Phase))
			}
			t.Fatalf("job %s not done in time (pods %q); its log:\n%s", name, states, podLogs(context.Background(), t, cli, ns, "batch.kubernetes.io/job-name="+name))
		case <-time.After(time.Second):
		}
	}
}

// podLogs returns the logs of the pods selected.
func podLogs(ctx context.Context, t *testing.T, cli kubernetes.Interface, ns, selector string) string {
	t.Helper()
	pods, err := cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "(" + err.Error() + ")"
	}
	var b strings.Builder
	for _, p := range pods.Items {
		rc, err := cli.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).Stream(ctx)
		if err != nil {
			fmt.Fprintf(&b, "(pod %s: %v)\n", p.Name, err)
			continue
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		b.Write(data)
	}
	return b.String()
}

// trialObjects lists the trial pods and ConfigMaps in ns.
func trialObjects(ctx context.Context, t *testing.T, cli kubernetes.Interface, ns string) []string {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: k8s.LabelRole + "=" + k8s.RoleTrial}
	var out []string
	pods, err := cli.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	cms, err := cli.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		out = append(out, "configmap/"+c.Name)
	}
	return out
}

// checkNamespacedRole asks the API server what the ServiceAccount may do:
// the runtime's calls in its namespace (enough: the Job succeeded), and
// nothing in another namespace or cluster-wide.
func checkNamespacedRole(ctx context.Context, t *testing.T, cli kubernetes.Interface, ns string) {
	t.Helper()
	user := "system:serviceaccount:" + ns + ":batchtune"
	for _, c := range []struct {
		ns, verb, resource, sub string
		want                    bool
	}{
		{ns, "create", "pods", "", true},
		{ns, "get", "pods", "log", true},
		{ns, "create", "configmaps", "", true},
		{ns, "get", "secrets", "", false},
		{ns, "create", "deployments", "", false},
		{"default", "create", "pods", "", false},
		{"default", "list", "configmaps", "", false},
		{"", "list", "pods", "", false},
	} {
		rev, err := cli.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
			User:               user,
			ResourceAttributes: &authv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Resource: c.resource, Subresource: c.sub},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rev.Status.Allowed != c.want {
			t.Errorf("%s may %s %s/%s in namespace %q: %v, want %v", user, c.verb, c.resource, c.sub, c.ns, rev.Status.Allowed, c.want)
		}
	}
}

// checkDaemon waits for the daemon's Deployment to be Available and asks
// its API, at the pod IP (pod IPs route on this host) and at the
// Service's address with the Service's name as Host.
func checkDaemon(ctx context.Context, t *testing.T, cli kubernetes.Interface, ns, token string) {
	t.Helper()
	for {
		dep, err := cli.AppsV1().Deployments(ns).Get(ctx, "batchtune-daemon", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		available := false
		for _, c := range dep.Status.Conditions {
			available = available || c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue
		}
		if available {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the daemon's Deployment is not Available: %+v; its log:\n%s", dep.Status, podLogs(context.Background(), t, cli, ns, "app.kubernetes.io/name=batchtune-daemon"))
		case <-time.After(500 * time.Millisecond):
		}
	}
	pods, err := cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=batchtune-daemon"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("the daemon's pod: %v %d", err, len(pods.Items))
	}
	base := "http://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "8790")
	get := func(url, host, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if host != "" {
			req.Host = host
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(base+"/healthz", "", ""); code != http.StatusOK {
		t.Errorf("GET /healthz without the token: %d %s, want 200 (probes carry no token)", code, body)
	}
	if code, body := get(base+"/api/v1/studies", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/studies without the token: %d %s, want 401 (reads need it beyond loopback)", code, body)
	}
	code, body := get(base+"/api/v1/studies", "", token)
	if code != http.StatusOK || !strings.Contains(body, `"deploy-e2e-daemon"`) {
		t.Errorf("GET /api/v1/studies with the token: %d %s, want 200 listing deploy-e2e-daemon", code, body)
	}
	svc, err := cli.CoreV1().Services(ns).Get(ctx, "batchtune-daemon", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcURL := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "8790")
	if code, body := get(svcURL+"/api/v1/studies", "batchtune-daemon:8790", token); code != http.StatusOK || !strings.Contains(body, `"deploy-e2e-daemon"`) {
		t.Errorf("GET /api/v1/studies through the Service as Host batchtune-daemon: %d %s", code, body)
	}
}

// removeNamespace deletes ns and the volumes made for it, and waits until
// the namespace is gone.
func removeNamespace(t *testing.T, cli kubernetes.Interface, ns string, pvs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cli.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s: %v", ns, err)
	}
	for {
		_, err := cli.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Errorf("namespace %s still there 90s after its deletion", ns)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, pv := range pvs {
		if err := cli.CoreV1().PersistentVolumes().Delete(context.Background(), pv, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting PersistentVolume %s: %v", pv, err)
		}
	}
}
