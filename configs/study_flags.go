package configs

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// serverFlags are the flag names tensorflow_model_server defines (its
// main.cc flag list, across the 2.x releases). TF Serving prints and
// ignores a flag it does not know, so a misspelt flag in a study would
// silently do nothing; names outside this list are refused instead.
var serverFlags = []string{
	"allow_version_labels_for_unavailable_models",
	"batching_parameters_file",
	"enable_batching",
	"enable_grpc_healthcheck_service",
	"enable_model_warmup",
	"enable_per_model_batching_parameters",
	"enable_profiler",
	"enable_signature_method_name_check",
	"file_system_poll_wait_seconds",
	"flush_filesystem_caches",
	"grpc_channel_arguments",
	"grpc_max_threads",
	"grpc_socket_path",
	"load_retry_interval_micros",
	"max_num_load_retries",
	"mixed_precision",
	"model_base_path",
	"model_config_file",
	"model_config_file_poll_wait_seconds",
	"model_name",
	"monitoring_config_file",
	"num_load_threads",
	"num_request_iterations_for_warmup",
	"num_tflite_interpreters_per_pool",
	"num_tflite_pools",
	"num_unload_threads",
	"per_process_gpu_memory_fraction",
	"platform_config_file",
	"port",
	"prefer_tflite_model",
	"remove_unused_fields_from_bundle_metagraph",
	"rest_api_enable_cors_support",
	"rest_api_num_threads",
	"rest_api_port",
	"rest_api_timeout_in_ms",
	"saved_model_tags",
	"skip_initialize_tpu",
	"ssl_config_file",
	"tensorflow_inter_op_parallelism",
	"tensorflow_intra_op_parallelism",
	"tensorflow_session_config_file",
	"tensorflow_session_parallelism",
	"thread_pool_factory_config_file",
	"use_alts_credentials",
	"use_tflite_model",
	"version",
	"xla_cpu_compilation_enabled",
}

// ownedFlags are set by batchtune for every trial; a study may not set
// them in target.flags.
var ownedFlags = map[string]string{
	"port":                     "target.ports.grpc",
	"rest_api_port":            "target.ports.rest",
	"model_name":               "target.model.name",
	"model_base_path":          "target.model.base_path",
	"model_config_file":        "target.model (batchtune serves one model by name)",
	"enable_batching":          "batchtune (always on: batching is what is tuned)",
	"batching_parameters_file": "batchtune (each trial's batching.config)",
	"max_num_load_retries":     "batchtune (0 in trials, so a bad configuration fails in seconds)",
	"monitoring_config_file":   "batchtune (it enables the Prometheus endpoint it scrapes)",
}

var flagSyntax = regexp.MustCompile(`^--([a-z][a-z0-9_]*)(=.*)?$`)

// IsServerFlag reports whether name (without dashes) is a flag of
// tensorflow_model_server.
func IsServerFlag(name string) bool {
	_, ok := slices.BinarySearch(serverFlags, name)
	return ok
}

// FlagName returns the name of a flag written "--name=value" or "--name",
// and false when flag is not written that way.
func FlagName(flag string) (string, bool) {
	m := flagSyntax.FindStringSubmatch(flag)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// checkFlags validates target.flags.
func (s *Study) checkFlags(ps *Problems) {
	tuned := map[string]bool{}
	for _, p := range s.Space {
		tuned[p.Name] = true
	}
	seen := map[string]int{}
	for i, f := range s.Target.Flags {
		field := "target.flags[" + strconv.Itoa(i) + "]"
		name, ok := FlagName(f)
		if !ok {
			ps.Add(field, `must be written "--name=value" with a lower-case flag name, got %q`, f)
			continue
		}
		if prev, dup := seen[name]; dup {
			ps.Add(field, "--%s is given twice (first at target.flags[%d])", name, prev)
			continue
		}
		seen[name] = i
		switch {
		case !IsServerFlag(name):
			hint := ""
			if c := closest(name, serverFlags); c != "" {
				hint = " (did you mean --" + c + "?)"
			}
			ps.Add(field, "--%s is not a tensorflow_model_server flag%s; TF Serving would ignore it silently", name, hint)
		case ownedFlags[name] != "":
			ps.Add(field, "--%s is set by %s; remove it here", name, ownedFlags[name])
		case tuned[name]:
			ps.Add(field, "--%s is tuned by space.%s; remove it here", name, name)
		}
	}
	// TF Serving refuses intra/inter-op parallelism together with a
	// positive session parallelism.
	if v, ok := flagValue(s.Target.Flags, "tensorflow_session_parallelism"); ok && v != "" && v != "0" {
		for _, other := range []string{"tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism"} {
			_, inFlags := flagValue(s.Target.Flags, other)
			if inFlags || tuned[other] {
				ps.Add("target.flags", "--tensorflow_session_parallelism=%s cannot be combined with --%s: TF Serving refuses to start", v, other)
			}
		}
	}
}

func flagValue(flags []string, name string) (string, bool) {
	for _, f := range flags {
		n, ok := FlagName(f)
		if ok && n == name {
			_, v, _ := strings.Cut(f, "=")
			return v, true
		}
	}
	return "", false
}
