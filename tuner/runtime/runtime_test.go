package runtime_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/batchtune/batchtune/tfserving"
	"github.com/batchtune/batchtune/tuner/runtime"
)

func TestConfigArgs(t *testing.T) {
	cfg := runtime.Config{IntraOpParallelism: 4, InterOpParallelism: 2, Flags: []string{"--grpc_max_threads=8"}}
	want := []string{
		"--enable_batching",
		"--batching_parameters_file=/b/batching.config",
		"--monitoring_config_file=/b/monitoring.config",
		"--max_num_load_retries=0",
		"--tensorflow_intra_op_parallelism=4",
		"--tensorflow_inter_op_parallelism=2",
		"--grpc_max_threads=8",
	}
	if diff := cmp.Diff(want, cfg.Args("/b/batching.config", "/b/monitoring.config")); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name     string
		cfg      runtime.Config
		want     []string // pieces of the message, all required
		sentinel error    // wrapped, when not nil
	}{
		// Zero parallelism means TF's choice and is fine.
		{"valid", runtime.Config{Flags: []string{"--rest_api_num_threads=4", "--enable_model_warmup"}}, nil, nil},
		// A flag the runtime owns is refused by name and position.
		{"reserved", runtime.Config{Flags: []string{"--grpc_max_threads=2", "--batching_parameters_file=/x"}}, []string{"flags[1]: --batching_parameters_file"}, runtime.ErrReservedFlag},
		// Not a flag at all.
		{"malformed", runtime.Config{Flags: []string{"-port=1"}}, []string{`flags[0]: "-port=1"`}, runtime.ErrBadFlag},
		// A flag name with a space or dash is not a TF flag.
		{"bad name", runtime.Config{Flags: []string{"--grpc max"}}, []string{`flags[0]`}, runtime.ErrBadFlag},
		// Every problem together.
		{"all", runtime.Config{IntraOpParallelism: -1, InterOpParallelism: -2, Flags: []string{"--port=1", "x"}},
			[]string{"4 problems", "intra_op_parallelism: must not be negative, got -1", "inter_op_parallelism: must not be negative, got -2", "flags[0]: --port", `flags[1]: "x"`}, runtime.ErrReservedFlag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: got nil")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error does not wrap %v: %v", tt.sentinel, err)
			}
		})
	}
}

func TestCheckFlagsExtraReserved(t *testing.T) {
	err := runtime.CheckFlags("args", []string{"--model_name=x"}, "model_name")
	if !errors.Is(err, runtime.ErrReservedFlag) || !strings.Contains(err.Error(), "args[0]: --model_name") {
		t.Fatalf("got %v", err)
	}
}

func TestExitReason(t *testing.T) {
	tests := []struct {
		name string
		exit runtime.Exit
		want string
	}{
		// A plain failure with the server's last words.
		{"exit code", runtime.Exit{Code: 1, Log: "loading\nFailed to start server. Error: INVALID_ARGUMENT\n\n"}, "exit code 1: Failed to start server. Error: INVALID_ARGUMENT"},
		// Killed by a signal.
		{"signal", runtime.Exit{Code: 137, Signal: "killed"}, `killed by signal "killed" (exit code 137)`},
		// The OOM killer, as an engine reports it.
		{"oom", runtime.Exit{Code: 137, Signal: "killed", OOMKilled: true}, "killed by the OOM killer (exit code 137)"},
		// Stopped by batchtune: the log does not make it a failure.
		{"stopped", runtime.Exit{Code: 0, Stopped: true, Log: "received terminated"}, "stopped by batchtune: received terminated"},
		// An engine error beside the code.
		{"detail", runtime.Exit{Code: 127, Detail: "exec: no such file"}, "exit code 127: exec: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.exit.Reason(); got != tt.want {
				t.Errorf("Reason: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExitFromCode(t *testing.T) {
	tests := []struct {
		code int
		want runtime.Exit
	}{
		{0, runtime.Exit{Code: 0}},                           // success
		{1, runtime.Exit{Code: 1}},                           // failure
		{137, runtime.Exit{Code: 137, Signal: "killed"}},     // SIGKILL
		{143, runtime.Exit{Code: 143, Signal: "terminated"}}, // SIGTERM
		{255, runtime.Exit{Code: 255}},                       // not a signal
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, runtime.ExitFromCode(tt.code)); diff != "" {
			t.Errorf("ExitFromCode(%d) (-want +got):\n%s", tt.code, diff)
		}
	}
}

func TestExitFromStatus(t *testing.T) {
	// Wait statuses as the kernel encodes them: code<<8, or the signal.
	tests := []struct {
		ws   syscall.WaitStatus
		want runtime.Exit
	}{
		{syscall.WaitStatus(3 << 8), runtime.Exit{Code: 3}},                        // exit(3)
		{syscall.WaitStatus(9), runtime.Exit{Code: 137, Signal: "killed"}},         // SIGKILL
		{syscall.WaitStatus(15), runtime.Exit{Code: 143, Signal: "terminated"}},    // SIGTERM
		{syscall.WaitStatus(6 | 0x80), runtime.Exit{Code: 134, Signal: "aborted"}}, // SIGABRT, core dumped
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, runtime.ExitFromStatus(tt.ws)); diff != "" {
			t.Errorf("ExitFromStatus(%#x) (-want +got):\n%s", int(tt.ws), diff)
		}
	}
}

func TestExitErrorWraps(t *testing.T) {
	err := error(&runtime.ExitError{Exit: runtime.Exit{Code: 2, Log: "x\nboom"}})
	if !errors.Is(err, runtime.ErrExited) {
		t.Fatal("ExitError does not wrap ErrExited")
	}
	if got, want := err.Error(), "runtime: server exited: exit code 2: boom"; got != want {
		t.Errorf("Error: got %q, want %q", got, want)
	}
}

func TestMonitoringConfig(t *testing.T) {
	want := "prometheus_config {\n  enable: true\n  path: \"/monitoring/prometheus/metrics\"\n}\n"
	if diff := cmp.Diff(want, string(runtime.MonitoringConfig())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var mc tfserving.MonitoringConfig
	if err := prototext.Unmarshal(runtime.MonitoringConfig(), &mc); err != nil {
		t.Fatalf("the monitoring config does not parse as TF's message: %v", err)
	}
	if !mc.GetPrometheusConfig().GetEnable() || mc.GetPrometheusConfig().GetPath() != runtime.MetricsPath {
		t.Errorf("parsed monitoring config: %v", &mc)
	}
	ep := runtime.Endpoints{GRPC: "h:1", REST: "h:2"}
	if got := ep.MetricsURL(); got != "http://h:2/monitoring/prometheus/metrics" {
		t.Errorf("MetricsURL: %s", got)
	}
}
