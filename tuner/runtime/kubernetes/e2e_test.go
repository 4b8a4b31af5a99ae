package kubernetes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	k8s "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
	"github.com/batchtune/batchtune/tuner/runtime/kubernetes/kubetest"
)

func TestMain(m *testing.M) { emulatortest.Main(m) }

// clusterStudy is a small study of the stand-in's ranker model on the
// test cluster: trial pods from an inline template, as a user writes it.
func clusterStudy(t *testing.T, name, space, search string, minDur string) (*configs.Study, []byte) {
	t.Helper()
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	doc := kubetest.StandInStudy(kubetest.Study{
		Name: name, Image: si.Image,
		Kubeconfig: os.Getenv(EnvKubeconfig), Namespace: testNamespace,
		Duration: minDur,
		Rest:     "space:\n" + space + "\n" + search + "\n",
	})
	s, err := configs.ParseStudy(filepath.Join(t.TempDir(), "study.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s, []byte(doc)
}

func studyPods(t *testing.T, cli kubernetes.Interface, study string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	pods, err := cli.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelStudy + "=" + study})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, p.Name+" "+string(p.Status.Phase))
	}
	cms, err := cli.CoreV1().ConfigMaps(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelStudy + "=" + study})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		out = append(out, "configmap "+c.Name)
	}
	return out
}

// TestE2EStudyOnTheCluster runs a whole (small) study through the tuner
// with every trial a pod: each trial is measured, the model reached at the
// pod's IP, and nothing is left in the cluster afterwards.
func TestE2EStudyOnTheCluster(t *testing.T) {
	cli, _ := cluster(t)
	name := "e2e-k8s-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	s, _ := clusterStudy(t, name, `  max_batch_size: {values: [4, 32]}
  batch_timeout_micros: {values: [1000]}
  num_batch_threads: {values: [2]}
  max_enqueued_batches: {values: [16]}`, "search: {strategy: grid, trials: 2}\nconfirmation: {top_k: 1, repeats: 2, max_repeats: 2}", "2s")
	rt, err := runtime.New(s.Target, runtime.Options{Study: s.Name, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	tu, err := tuner.New(s, db, rt, nil, &tuner.Options{Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tu.Run(context.Background(), tuner.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Trials) < 2 {
		t.Fatalf("%d trials, want at least 2", len(rep.Trials))
	}
	for _, tr := range rep.Trials {
		var ready time.Duration
		for _, p := range tr.Phases {
			if p.State == store.TrialWarming || p.State == store.TrialMeasuring {
				ready = p.At.Sub(tr.Phases[0].At)
				break
			}
		}
		t.Logf("trial %d %s: %s objective %v, start to ready %v, reason %q", tr.Seq, tr.Role, tr.State, deref(tr.Objective), ready.Round(time.Millisecond), tr.Reason)
		if tr.State == store.TrialFailed || tr.Objective == nil {
			t.Errorf("trial %d: %s %q, want measured", tr.Seq, tr.State, tr.Reason)
		}
	}
	if left := studyPods(t, cli, name); len(left) > 0 {
		t.Errorf("left in the cluster after the study: %q", left)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestE2EParallelStudyKilledAndResumed runs a study with parallelism 2
// through the batchtune binary, kills it with SIGKILL while two trial pods
// run (nothing can remove them then), and runs it again: the resumed run
// collects the pods first, redoes the interrupted trials, finishes with a
// recommendation, and leaves nothing in the cluster. The test cluster has
// one node, so the pods share it (spread: none); the trials must have run
// side by side, each with its node recorded.
func TestE2EParallelStudyKilledAndResumed(t *testing.T) {
	cli, _ := cluster(t)
	bin := emulatortest.Binaries(t, "batchtune")
	name := "e2e-k8s-par-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	doc := kubetest.StandInStudy(kubetest.Study{
		Name: name, Image: si.Image, Kubeconfig: os.Getenv(EnvKubeconfig), Namespace: testNamespace,
		Spread: k8s.SpreadNone, Duration: "5s",
		Rest: `space:
  max_batch_size: {values: [4, 8, 16, 32]}
  batch_timeout_micros: {values: [1000]}
  num_batch_threads: {values: [2]}
  max_enqueued_batches: {values: [16]}
search: {strategy: grid, trials: 4, parallelism: 2}
confirmation: {top_k: 1, repeats: 2, max_repeats: 2}
`,
	})
	dir := t.TempDir()
	studyFile := filepath.Join(dir, "study.yaml")
	if err := os.WriteFile(studyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"tune", "--config", studyFile, "--db", filepath.Join(dir, "batchtune.db"), "--state-dir", filepath.Join(dir, "state"), "--json"}
	cmd := exec.Command(filepath.Join(bin, "batchtune"), args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	// Wait for two trial pods running at once.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods := studyPods(t, cli, name)
		if strings.Count(strings.Join(pods, "\n"), " Running") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two trial pods running at once within 2m (pods %q); batchtune said:\n%s", pods, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Kill() // SIGKILL: no cleanup can run
	cmd.Wait()
	killed = true
	left := studyPods(t, cli, name)
	if len(left) < 2 {
		t.Fatalf("left after kill -9: %q, want both trial pods: this test cannot tell a collection from nothing", left)
	}
	t.Logf("left by the killed batchtune: %q", left)
	// batchtune cleanup sees them as orphans (a dry run: the resume below
	// is what must collect them).
	dry, err := exec.Command(filepath.Join(bin, "batchtune"), "cleanup", "--kubernetes", "--dry-run",
		"--kubeconfig", os.Getenv(EnvKubeconfig), "--namespace", testNamespace).CombinedOutput()
	if err != nil {
		t.Fatalf("batchtune cleanup --kubernetes --dry-run: %v\n%s", err, dry)
	}
	for _, l := range left {
		obj, _, _ := strings.Cut(strings.TrimPrefix(l, "configmap "), " ")
		if !strings.Contains(string(dry), "/"+obj+" (study "+name) {
			t.Errorf("cleanup --dry-run does not list %s of study %s:\n%s", obj, name, dry)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	resumed := exec.CommandContext(ctx, filepath.Join(bin, "batchtune"), args...)
	var stderr strings.Builder
	resumed.Stderr = &stderr
	stdout, err := resumed.Output()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, stderr.String())
	}
	var rep tuner.Report
	if err := json.Unmarshal(stdout, &rep); err != nil {
		t.Fatalf("resumed run's report: %v\n%s", err, stdout)
	}
	if !rep.Resumed || rep.Run.State != store.RunFinished || rep.Recommendation == nil {
		t.Errorf("resumed %v, run %s (%s), recommendation %v: want a resumed run that finished with one", rep.Resumed, rep.Run.State, rep.Run.Detail, rep.Recommendation != nil)
	}
	var search []store.Trial
	interrupted := 0
	for _, tr := range rep.Trials {
		t.Logf("trial %d %s on %q: %s objective %v %s", tr.Seq, tr.Role, tr.Node, tr.State, deref(tr.Objective), tr.Reason)
		if tr.Role != store.RoleSearch {
			continue
		}
		if tr.State == store.TrialInterrupted {
			interrupted++
			continue
		}
		search = append(search, tr)
		if tr.Node == "" {
			t.Errorf("trial %d: no node recorded", tr.Seq)
		}
	}
	if interrupted < 2 {
		t.Errorf("%d search trials recorded as interrupted, want the killed round's 2", interrupted)
	}
	if !overlapping(search) {
		t.Error("no two search trials ran at the same time: parallelism 2 ran them one after another")
	}
	if left := studyPods(t, cli, name); len(left) > 0 {
		t.Errorf("left in the cluster after the resumed run: %q", left)
	}
}

// overlapping reports whether two of trs were running at the same time
// (from their first to their last recorded phase).
func overlapping(trs []store.Trial) bool {
	for i, a := range trs {
		for _, b := range trs[i+1:] {
			if len(a.Phases) < 2 || len(b.Phases) < 2 {
				continue
			}
			as, ae := a.Phases[0].At, a.Phases[len(a.Phases)-1].At
			bs, be := b.Phases[0].At, b.Phases[len(b.Phases)-1].At
			if as.Before(be) && bs.Before(ae) {
				return true
			}
		}
	}
	return false
}
