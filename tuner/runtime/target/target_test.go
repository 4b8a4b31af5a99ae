package target_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/process"
	"github.com/batchtune/batchtune/tuner/runtime/target"
)

var common = target.Options{Study: "ranker-nightly", StateDir: "/var/lib/batchtune", StopGrace: 3 * time.Second}

func TestProcessOptions(t *testing.T) {
	tg := configs.Target{
		Runtime: configs.RuntimeProcess,
		Model:   configs.Model{Name: "ranker", BasePath: "/srv/models/ranker"},
		Ports:   configs.Ports{GRPC: 18500, REST: 18501},
		Flags:   []string{"--rest_api_num_threads=4"},
		Process: configs.ProcessTarget{
			Binary: "/usr/bin/tensorflow_model_server",
			Args:   []string{"--enable_model_warmup=true"},
			Env:    map[string]string{"TF_CPP_MIN_LOG_LEVEL": "1", "CUDA_VISIBLE_DEVICES": "0"},
		},
	}
	want := process.Options{
		Binary:        "/usr/bin/tensorflow_model_server",
		ModelName:     "ranker",
		ModelBasePath: "/srv/models/ranker",
		Args:          []string{"--enable_model_warmup=true", "--rest_api_num_threads=4"},
		Env:           []string{"CUDA_VISIBLE_DEVICES=0", "TF_CPP_MIN_LOG_LEVEL=1"}, // in name order
		GRPCPort:      18500,
		RESTPort:      18501,
		StateDir:      "/var/lib/batchtune",
		Study:         "ranker-nightly",
		StopGrace:     3 * time.Second,
	}
	if diff := cmp.Diff(want, target.ProcessOptions(tg, common), cmpopts.IgnoreTypes(&slog.Logger{})); diff != "" {
		t.Errorf("ProcessOptions (-want +got):\n%s", diff)
	}
}

func TestDockerOptions(t *testing.T) {
	tests := []struct {
		name string
		tg   configs.Target
		want docker.Options
	}{
		// An image with the model directory mounted at the base path.
		{"image", configs.Target{
			Runtime: configs.RuntimeDocker,
			Model:   configs.Model{Name: "ranker", BasePath: "/models/ranker"},
			Ports:   configs.Ports{GRPC: 8500, REST: 8501},
			Flags:   []string{"--grpc_max_threads=8"},
			Docker: configs.DockerTarget{
				Image: "tensorflow/serving:2.16.1-gpu", ModelDir: "/srv/models/ranker",
				Env: map[string]string{"TF_CPP_MIN_LOG_LEVEL": "2"}, Args: []string{"--enable_model_warmup=true"},
				GPUs: "all", Network: "host", Pull: configs.PullMissing,
			},
		}, docker.Options{
			Study: "ranker-nightly", StateDir: "/var/lib/batchtune", StopGrace: 3 * time.Second,
			Image: "tensorflow/serving:2.16.1-gpu", ModelName: "ranker", ModelBasePath: "/models/ranker",
			Mounts: []docker.Mount{{Source: "/srv/models/ranker", Target: "/models/ranker"}},
			Env:    []string{"TF_CPP_MIN_LOG_LEVEL=2"},
			Args:   []string{"--enable_model_warmup=true", "--grpc_max_threads=8"},
			GPUs:   "all", Network: "host", Pull: "missing", GRPCPort: 8500, RESTPort: 8501,
		}},
		// No base path: the model directory goes where the image looks.
		{"default base path", configs.Target{
			Runtime: configs.RuntimeDocker,
			Model:   configs.Model{Name: "accel"},
			Docker:  configs.DockerTarget{Image: "localhost/tfs-emulator:dev", ModelDir: "/home/u/models/accel", Pull: configs.PullNever},
		}, docker.Options{
			Study: "ranker-nightly", StateDir: "/var/lib/batchtune", StopGrace: 3 * time.Second,
			Image: "localhost/tfs-emulator:dev", ModelName: "accel",
			Mounts: []docker.Mount{{Source: "/home/u/models/accel", Target: "/models/accel"}},
			Pull:   "never",
		}},
		// A user's container: no image, no mounts; it keeps its own.
		{"existing container", configs.Target{
			Runtime: configs.RuntimeDocker,
			Model:   configs.Model{Name: "ranker"},
			Ports:   configs.Ports{GRPC: 8500, REST: 8501},
			Docker:  configs.DockerTarget{Container: "tfs-prod", Pull: configs.PullMissing},
		}, docker.Options{
			Study: "ranker-nightly", StateDir: "/var/lib/batchtune", StopGrace: 3 * time.Second,
			Existing: "tfs-prod", ModelName: "ranker", Pull: "missing", GRPCPort: 8500, RESTPort: 8501,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := target.DockerOptions(tt.tg, common)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreTypes(&slog.Logger{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("DockerOptions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNew: the runtime named is the one made, its options checked.
func TestNew(t *testing.T) {
	rt, err := target.New(configs.Target{
		Runtime: configs.RuntimeProcess,
		Model:   configs.Model{Name: "m", BasePath: t.TempDir()},
		Process: configs.ProcessTarget{Binary: "true"},
	}, target.Options{Study: "s", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.(*process.Runtime); !ok {
		t.Errorf("runtime process made a %T", rt)
	}

	rt, err = target.New(configs.Target{
		Runtime: configs.RuntimeDocker,
		Model:   configs.Model{Name: "m"},
		Docker:  configs.DockerTarget{Image: "img"},
	}, target.Options{Study: "s", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := rt.(*docker.Runtime)
	if !ok {
		t.Fatalf("runtime docker made a %T", rt)
	}
	d.Close()

	// A flag the runtime owns, given by the study, is refused by name.
	_, err = target.New(configs.Target{
		Runtime: configs.RuntimeProcess,
		Model:   configs.Model{Name: "m", BasePath: "/m"},
		Flags:   []string{"--max_num_load_retries=5"},
		Process: configs.ProcessTarget{Binary: "true"},
	}, target.Options{Study: "s"})
	if !strings.Contains(err.Error(), "--max_num_load_retries") {
		t.Errorf("a reserved flag: got %v", err)
	}

	_, err = target.New(configs.Target{Runtime: "kubernetes"}, target.Options{})
	if err == nil || !strings.Contains(err.Error(), `got "kubernetes"`) {
		t.Errorf("unknown runtime: got %v", err)
	}
}
