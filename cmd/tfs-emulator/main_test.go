package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// failLine returns the single "Failed to start server" line of out.
func failLine(t *testing.T, out string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Failed to start server. Error: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want exactly one 'Failed to start server' line, got %d in:\n%s", len(lines), out)
	}
	return lines[0]
}

// TestBadInput: each bad input stops the stand-in with one line that names
// the file (and line and field where there is one) and exit status 255.
func TestBadInput(t *testing.T) {
	good := modelDir(t, accel{launchUS: 1000}.json())
	badDesc := modelDir(t, strings.Replace(accel{launchUS: 1000}.json(), `"launch_us": 1000`, `"launch_us": 1000, "lunch_us": 5`, 1))
	badValue := modelDir(t, strings.Replace(accel{launchUS: 1000}.json(), `"memory_mib": 4096`, `"memory_mib": -4`, 1))
	syntaxDesc := modelDir(t, "{\n  \"device\": \"cpu\",\n  \"cpu\": {\"hidden\": [8}\n}\n")
	malformed := tempFile(t, "batching.config", "max_batch_size { value: 8 }\nbatch_timeout_micros: 5\n")
	misspelled := tempFile(t, "batching.config", "num_batch_threads { value: 1 }\nmax_batch_sise { value: 8 }\n")
	invalid := tempFile(t, "batching.config", "max_batch_size { value: 8 }\nallowed_batch_sizes: 4\n")
	tests := []struct {
		name string
		args []string
		want []string // substrings of the failure line
	}{
		{"malformed batching.config", []string{"--model_base_path=" + good, "--enable_batching", "--batching_parameters_file=" + malformed},
			[]string{"INVALID_ARGUMENT: Invalid protobuf file: '" + malformed + "'", "(line 2:23)"}},
		{"misspelled batching field", []string{"--model_base_path=" + good, "--enable_batching", "--batching_parameters_file=" + misspelled},
			[]string{"Invalid protobuf file: '" + misspelled + "'", "(line 2:1): unknown field: max_batch_sise"}},
		{"invalid batching.config values", []string{"--model_base_path=" + good, "--enable_batching", "--batching_parameters_file=" + invalid, "--max_num_load_retries=0"},
			[]string{"INVALID_ARGUMENT: " + invalid + ": allowed_batch_sizes[0]: last entry must equal max_batch_size (8), got 4"}},
		{"missing model dir", []string{"--model_base_path=/nonexistent/models/m"},
			[]string{"NOT_FOUND: Could not find base path /nonexistent/models/m for servable default"}},
		{"unknown field in model.json", []string{"--model_base_path=" + badDesc, "--max_num_load_retries=0"},
			[]string{filepath.Join(badDesc, "1", "model.json") + ":10: accelerator.lunch_us: unknown field"}},
		{"bad value in model.json", []string{"--model_base_path=" + badValue, "--max_num_load_retries=0"},
			[]string{filepath.Join(badValue, "1", "model.json") + ":10: accelerator.memory_mib: must be positive, got -4"}},
		{"syntax error in model.json", []string{"--model_base_path=" + syntaxDesc, "--max_num_load_retries=0"},
			[]string{filepath.Join(syntaxDesc, "1", "model.json") + ":3:", "JSON syntax error"}},
		{"batching file without batching", []string{"--model_base_path=" + good, "--batching_parameters_file=" + malformed},
			[]string{"INVALID_ARGUMENT: server_options.batching_parameters_file is set without setting server_options.enable_batching to true."}},
		{"session and intra parallelism", []string{"--model_base_path=" + good, "--tensorflow_session_parallelism=2", "--tensorflow_intra_op_parallelism=2"},
			[]string{"Either configure server_options.tensorflow_session_parallelism or"}},
		{"batch too big for the device", []string{"--model_base_path=" + good, "--enable_batching", "--max_num_load_retries=0",
			"--batching_parameters_file=" + tempFile(t, "b.config", "max_batch_size { value: 5000 }\n")},
			[]string{"RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[5000,4]"}},
		{"multi-model config", []string{"--model_base_path=" + good, "--model_config_file=/x.config"},
			[]string{"UNIMPLEMENTED: --model_config_file is not supported"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runToExit(t, append([]string{"--port=" + strconv.Itoa(freePort(t))}, tt.args...))
			if code != 255 {
				t.Errorf("exit status %d, want 255; output:\n%s", code, out)
			}
			line := failLine(t, out)
			for _, w := range tt.want {
				if !strings.Contains(line, w) {
					t.Errorf("failure line\n  %s\ndoes not contain\n  %s", line, w)
				}
			}
		})
	}
}

func TestBadFlagValue(t *testing.T) {
	code, out := runToExit(t, []string{"--port=eighty", "--model_base_path=/x"})
	if code != 255 || !strings.Contains(out, `Couldn't interpret value "eighty" for flag port.`) || !strings.Contains(out, "usage:") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	code, out = runToExit(t, []string{"--port=8500"})
	if code != 255 || !strings.Contains(out, "--model_base_path=string") {
		t.Errorf("without --model_base_path: exit %d, want 255 and the usage; output:\n%s", code, out)
	}
}

func TestVersion(t *testing.T) {
	code, out := runToExit(t, []string{"--version"})
	if code != 0 || !strings.HasPrefix(out, "TensorFlow ModelServer: ") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

// TestUnknownFlagsIgnored: unknown arguments are printed and the server
// starts anyway, as TF's does.
func TestUnknownFlagsIgnored(t *testing.T) {
	base := modelDir(t, accel{launchUS: 1000}.json())
	p := launch(t, base, "--no_such_flag=3", "--port", "stray")
	if _, err := p.predict(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"unknown argument: --no_such_flag=3", "unknown argument: --port", "unknown argument: stray"} {
		if !strings.Contains(p.out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, p.out.String())
		}
	}
}

// TestLoadRetries: a failing load is retried max_num_load_retries times,
// --load_retry_interval_micros apart, then the server fails.
func TestLoadRetries(t *testing.T) {
	base := modelDir(t, accel{launchUS: 1000}.json())
	b := tempFile(t, "b.config", "max_batch_size { value: 5000 }\n")
	code, out := runToExit(t, []string{"--port=" + strconv.Itoa(freePort(t)), "--model_base_path=" + base, "--enable_batching",
		"--batching_parameters_file=" + b, "--max_num_load_retries=2", "--load_retry_interval_micros=10000"})
	if code != 255 {
		t.Errorf("exit %d, want 255", code)
	}
	if n := strings.Count(out, "Loading servable failed"); n != 3 {
		t.Errorf("%d failed attempts logged, want 3 (1 + 2 retries):\n%s", n, out)
	}
	failLine(t, out)
}

// TestEntrypoint: --docker_entrypoint builds TF's image command line from
// MODEL_NAME and MODEL_BASE_PATH; later arguments override it.
func TestEntrypoint(t *testing.T) {
	root := t.TempDir()
	writeAt(t, filepath.Join(root, "ranker", "1", "model.json"), accel{launchUS: 1000}.json())
	ports := freePorts(t, 2)
	grpcPort, restPort := ports[0], ports[1]
	cmd := command([]string{"--docker_entrypoint", "--port=" + strconv.Itoa(grpcPort), "--rest_api_port=" + strconv.Itoa(restPort)},
		"MODEL_NAME=ranker", "MODEL_BASE_PATH="+root)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	p := &proc{cmd: cmd, out: out, grpc: grpcPort, rest: restPort, done: done}
	t.Cleanup(func() { p.stop(t) })
	for i := 0; ; i++ {
		if strings.Contains(out.String(), "Running gRPC ModelServer") {
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("exited: %v\n%s", err, out.String())
		default:
		}
		if i > 600 {
			t.Fatalf("not serving after 30s:\n%s", out.String())
		}
		sleep50()
	}
	for _, want := range []string{"model_name=ranker", "model_base_path=" + root + "/ranker"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
}
