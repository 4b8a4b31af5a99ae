package kubernetes_test

import (
	"context"
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

// TestE2EKilledBatchtuneLeavesNothingAfterResume kills batchtune with
// SIGKILL while a trial pod runs: the pod stays (nothing could remove it),
// and the next batchtune on the study collects it before anything else.
func TestE2EKilledBatchtuneLeavesNothingAfterResume(t *testing.T) {
	cli, _ := cluster(t)
	bin := emulatortest.Binaries(t, "batchtune")
	name := "e2e-k8s-kill-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	s, doc := clusterStudy(t, name, `  max_batch_size: {values: [4, 32]}
  batch_timeout_micros: {values: [1000]}
  num_batch_threads: {values: [2]}
  max_enqueued_batches: {values: [16]}`, "search: {strategy: grid, trials: 2}\nconfirmation: {top_k: 1, repeats: 2, max_repeats: 2}", "30s")
	dir := t.TempDir()
	studyFile := filepath.Join(dir, "study.yaml")
	if err := os.WriteFile(studyFile, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	cmd := exec.Command(filepath.Join(bin, "batchtune"), "tune", "--config", studyFile,
		"--db", filepath.Join(dir, "batchtune.db"), "--state-dir", stateDir)
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
	// Wait for a trial pod that runs.
	deadline := time.Now().Add(90 * time.Second)
	for {
		pods := studyPods(t, cli, name)
		if strings.Contains(strings.Join(pods, "\n"), " Running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trial pod running within 90s (pods %q); batchtune said:\n%s", pods, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd.Process.Kill() // SIGKILL: no cleanup can run
	cmd.Wait()
	killed = true
	left := studyPods(t, cli, name)
	if len(left) == 0 {
		t.Fatal("nothing left after kill -9: this test cannot tell a collection from nothing")
	}
	t.Logf("left by the killed batchtune: %q", left)

	// The resumed batchtune's runtime: Recover collects them first.
	rt, err := runtime.New(s.Target, runtime.Options{Study: s.Name, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatalf("Recover after kill -9: %v", err)
	}
	if left := studyPods(t, cli, name); len(left) > 0 {
		t.Errorf("left after the resumed batchtune's Recover: %q", left)
	}
	if err := rt.Restore(ctx); err != nil {
		t.Error(err)
	}
}
