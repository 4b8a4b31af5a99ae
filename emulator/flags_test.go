package emulator

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseArgs(t *testing.T) {
	def := func(f func(c *Config)) Config {
		c := DefaultConfig()
		c.EnableModelWarmup = true
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		args    []string
		want    Config
		unknown []string
		err     bool
	}{
		{
			// TF's defaults: port 8500, no REST, model "default", warmup on, 5 retries a minute apart.
			name: "defaults",
			want: def(func(c *Config) {}),
		},
		{
			// The flags a batchtune trial passes.
			name: "trial flags",
			args: []string{"--port=9000", "--rest_api_port=9001", "--model_name=ranker", "--model_base_path=/models/ranker",
				"--enable_batching", "--batching_parameters_file=/b.config", "--tensorflow_intra_op_parallelism=2",
				"--tensorflow_inter_op_parallelism=4", "--max_num_load_retries=0", "--monitoring_config_file=/m.config"},
			want: def(func(c *Config) {
				c.Port, c.RESTAPIPort, c.ModelName, c.ModelBasePath = 9000, 9001, "ranker", "/models/ranker"
				c.EnableBatching, c.BatchingParametersFile = true, "/b.config"
				c.IntraOpParallelism, c.InterOpParallelism, c.MaxNumLoadRetries = 2, 4, 0
				c.MonitoringConfigFile = "/m.config"
			}),
		},
		{
			// Booleans take true/false/1/0; the last occurrence wins.
			name: "bool forms and override",
			args: []string{"--enable_batching=1", "--enable_model_warmup=false", "--enable_batching=0", "--port=1", "--port=2"},
			want: def(func(c *Config) { c.EnableModelWarmup = false; c.Port = 2 }),
		},
		{
			// TF only reads --name=value: a separated value, single dashes
			// and unknown names are unknown arguments, printed and ignored.
			name:    "unknown arguments",
			args:    []string{"--port", "8600", "-model_name=x", "--no_such_flag=1", "stray"},
			want:    def(func(c *Config) {}),
			unknown: []string{"--port", "8600", "-model_name=x", "--no_such_flag=1", "stray"},
		},
		{
			// The retry interval in microseconds; negative means no wait.
			name: "retry interval",
			args: []string{"--load_retry_interval_micros=250000", "--num_request_iterations_for_warmup=3"},
			want: def(func(c *Config) { c.LoadRetryInterval = 250 * time.Millisecond; c.WarmupIterations = 3 }),
		},
		{
			name: "negative retry interval",
			args: []string{"--load_retry_interval_micros=-1"},
			want: def(func(c *Config) { c.LoadRetryInterval = 0 }),
		},
		{
			// A value that does not parse for the flag's type stops TF.
			name: "bad int", args: []string{"--port=eighty"}, err: true,
		},
		{
			name: "bad bool", args: []string{"--enable_batching=yes"}, err: true,
		},
		{
			name: "int32 overflow", args: []string{"--port=4294967296"}, err: true,
		},
	}
	for _, tt := range tests {
		got, err := ParseArgs(tt.args)
		if tt.err {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%s: error %v, want ErrConfig", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got.Config, cmpopts.IgnoreFields(Config{}, "Logger", "Clock", "GRPCListener", "RESTListener")); diff != "" {
			t.Errorf("%s: config (-want +got)\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.unknown, got.Unknown); diff != "" {
			t.Errorf("%s: unknown (-want +got)\n%s", tt.name, diff)
		}
	}
}

func TestParseArgsRejectsAndVersion(t *testing.T) {
	a, err := ParseArgs([]string{"--model_config_file=/x", "--ssl_config_file=", "--version", "--saved_model_tags=serve,gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"model_config_file"}, a.RejectedOptions); diff != "" {
		t.Errorf("rejected (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--saved_model_tags=serve,gpu"}, a.Unsupported); diff != "" {
		t.Errorf("unsupported (-want +got)\n%s", diff)
	}
	if !a.Version {
		t.Error("--version not seen")
	}
}

func TestEntrypointArgs(t *testing.T) {
	env := map[string]string{"MODEL_NAME": "ranker"}
	got := EntrypointArgs(func(k string) string { return env[k] }, []string{"--enable_batching"})
	want := []string{"--port=8500", "--rest_api_port=8501", "--model_name=ranker", "--model_base_path=/models/ranker", "--enable_batching"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	got = EntrypointArgs(func(string) string { return "" }, nil)
	if got[2] != "--model_name=model" || got[3] != "--model_base_path=/models/model" {
		t.Errorf("image defaults: %v", got)
	}
}
