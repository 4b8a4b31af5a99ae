package runtime_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/process"
)

// TestNew: the runtime named is the one made, its options checked, through
// the kinds the docker and process packages register.
func TestNew(t *testing.T) {
	rt, err := runtime.New(configs.Target{
		Runtime: configs.RuntimeProcess,
		Model:   configs.Model{Name: "m", BasePath: t.TempDir()},
		Process: configs.ProcessTarget{Binary: "true"},
	}, runtime.Options{Study: "s", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.(*process.Runtime); !ok {
		t.Errorf("runtime process made a %T", rt)
	}

	rt, err = runtime.New(configs.Target{
		Runtime: configs.RuntimeDocker,
		Model:   configs.Model{Name: "m"},
		Docker:  configs.DockerTarget{Image: "img"},
	}, runtime.Options{Study: "s", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := rt.(*docker.Runtime)
	if !ok {
		t.Fatalf("runtime docker made a %T", rt)
	}
	d.Close()

	// A flag the runtime owns, given by the study, is refused by name.
	_, err = runtime.New(configs.Target{
		Runtime: configs.RuntimeProcess,
		Model:   configs.Model{Name: "m", BasePath: "/m"},
		Flags:   []string{"--max_num_load_retries=5"},
		Process: configs.ProcessTarget{Binary: "true"},
	}, runtime.Options{Study: "s"})
	if !strings.Contains(err.Error(), "--max_num_load_retries") {
		t.Errorf("a reserved flag: got %v", err)
	}

	_, err = runtime.New(configs.Target{Runtime: "kubernetes"}, runtime.Options{})
	if err == nil || !strings.Contains(err.Error(), `got "kubernetes"`) {
		t.Errorf("unknown runtime: got %v", err)
	}
}

// TestKinds: each runtime package registers its kind under the name a
// study's target.runtime uses, and an unknown kind's error lists them.
func TestKinds(t *testing.T) {
	if diff := cmp.Diff([]string{configs.RuntimeDocker, configs.RuntimeProcess}, runtime.Kinds()); diff != "" {
		t.Errorf("Kinds (-want +got):\n%s", diff)
	}
	_, err := runtime.New(configs.Target{Runtime: "podman"}, runtime.Options{})
	if err == nil || err.Error() != `runtime: target.runtime: want "docker" or "process", got "podman"` {
		t.Errorf("unknown kind: got %v", err)
	}
}

// TestRegisterTwicePanics: a kind registered twice is a programming error.
func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a second Register of docker did not panic")
		}
	}()
	runtime.Register(configs.RuntimeDocker, func(configs.Target, runtime.Options) (runtime.Runtime, error) { return nil, nil })
}
