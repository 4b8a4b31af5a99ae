package process_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/process"
)

var common = runtime.Options{Study: "ranker-nightly", StateDir: "/var/lib/batchtune", StopGrace: 3 * time.Second}

func TestTargetOptions(t *testing.T) {
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
	if diff := cmp.Diff(want, process.TargetOptions(tg, common), cmpopts.IgnoreTypes(&slog.Logger{})); diff != "" {
		t.Errorf("TargetOptions (-want +got):\n%s", diff)
	}
}
