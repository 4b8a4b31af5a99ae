package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/batchtune/batchtune/tuner/runtime/docker"
)

// TestSweepSparesALiveOwnersTrial: on the real engine, the leftover sweep
// at Recover leaves a trial container of the study whose batchtune
// (owner label pid@host) still runs, and says whose it is, while it
// removes one whose batchtune is dead (a kill -9). Once the other owner
// is gone too, the next Recover removes its container (issue 15 item 5:
// a daemon and a one-shot tune of one study removed each other's live
// trial containers).
func TestSweepSparesALiveOwnersTrial(t *testing.T) {
	cli := engine(t)
	dir := t.TempDir()
	opts := fakeOptions(t, dir)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}

	// The other batchtune, alive: a process of this machine.
	other := exec.Command("sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	otherDone := false
	t.Cleanup(func() {
		if !otherDone {
			other.Process.Kill()
			other.Wait()
		}
	})
	// A batchtune that was killed: a process that has ended.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(gone.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d of the ended process answers (%v): it was reused", gone.Process.Pid, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	suffix := randHex(4)
	liveName, deadName := "bt-sweep-live-"+suffix, "bt-sweep-dead-"+suffix
	liveOwner := fmt.Sprintf("%d@%s", other.Process.Pid, host)
	mount := modelDir(t)
	for _, c := range []struct{ name, owner string }{
		{liveName, liveOwner},
		{deadName, fmt.Sprintf("%d@%s", gone.Process.Pid, host)},
	} {
		created, err := cli.ContainerCreate(ctx, &container.Config{
			Image:  opts.Image,
			Env:    []string{"MODEL_NAME=fake", "MODEL_BASE_PATH=/models"},
			Labels: map[string]string{docker.LabelStudy: opts.Study, docker.LabelRole: docker.RoleTrial, docker.LabelOwner: c.owner},
		}, &container.HostConfig{Binds: []string{mount + ":/models/fake:ro"}}, nil, nil, c.name)
		if err != nil {
			t.Fatalf("creating %s: %v", c.name, err)
		}
		t.Cleanup(func() { removeContainer(t, c.name) })
		if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			t.Fatalf("starting %s: %v", c.name, err)
		}
	}
	has := func(name string) bool {
		return slices.ContainsFunc(trialContainers(t, opts.Study), func(s string) bool { return strings.Contains(s, name) })
	}
	if !has(liveName) || !has(deadName) {
		t.Fatalf("before the sweep: %v, want both containers", trialContainers(t, opts.Study))
	}

	rt := newRuntime(t, opts)
	err = rt.Recover(ctx)
	want := fmt.Sprintf("in use by pid %d on host %s", other.Process.Pid, host)
	if !errors.Is(err, docker.ErrTrialInUse) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), liveName) {
		t.Errorf("Recover with another batchtune's live trial: %v, want ErrTrialInUse naming %s and %q", err, liveName, want)
	}
	if !has(liveName) {
		t.Errorf("the live batchtune's trial container was removed: %v", trialContainers(t, opts.Study))
	}
	if has(deadName) {
		t.Errorf("the dead batchtune's trial container was kept: %v", trialContainers(t, opts.Study))
	}

	// The other batchtune ends (kill -9): its container is a leftover now.
	other.Process.Kill()
	other.Wait()
	otherDone = true
	if err := rt.Recover(ctx); err != nil {
		t.Fatalf("Recover once the owner is gone: %v", err)
	}
	if has(liveName) {
		t.Errorf("the container of a batchtune that died was kept: %v", trialContainers(t, opts.Study))
	}
}
