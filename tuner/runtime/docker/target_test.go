package docker_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
)

var targetCommon = runtime.Options{Study: "ranker-nightly", StateDir: "/var/lib/batchtune", StopGrace: 3 * time.Second}

func TestTargetOptions(t *testing.T) {
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
			got := docker.TargetOptions(tt.tg, targetCommon)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreTypes(&slog.Logger{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("TargetOptions (-want +got):\n%s", diff)
			}
		})
	}
}
