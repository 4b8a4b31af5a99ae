package emulator

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Args is a parsed tensorflow_model_server command line.
type Args struct {
	Config Config
	// Unknown are the arguments that matched no flag. TF prints each as
	// "unknown argument: ARG" and carries on.
	Unknown []string
	// Version is --version: print the version and exit.
	Version bool
	// Unsupported are flags TF has that the stand-in accepts but does not
	// model, with the values given (for a warning).
	Unsupported []string
	// RejectedOptions are set flags whose feature the stand-in cannot
	// provide at all (multi-model config files, TLS); starting fails.
	RejectedOptions []string
}

type flagKind int

const (
	kindBool flagKind = iota
	kindInt32
	kindInt64
	kindFloat
	kindString
)

type flagDef struct {
	kind flagKind
	help string
	set  func(a *Args, v string) // v already validated for kind
	// modelled is false for flags the stand-in accepts but ignores.
	modelled bool
	// reject is true for flags whose non-default value cannot be served.
	reject bool
}

// flagDefs are tensorflow_model_server's flags (TF Serving 2.x main.cc),
// with the same names and value types.
var flagDefs = map[string]flagDef{
	"port":                         {kind: kindInt32, modelled: true, help: "TCP port to listen on for gRPC API.", set: func(a *Args, v string) { a.Config.Port = atoi(v) }},
	"grpc_socket_path":             {kind: kindString, modelled: true, help: "If non-empty, also listen to a UNIX socket for gRPC API on the given path.", set: func(a *Args, v string) { a.Config.GRPCSocketPath = v }},
	"rest_api_port":                {kind: kindInt32, modelled: true, help: "Port to listen on for HTTP/REST API. If set to zero HTTP/REST API will not be exported.", set: func(a *Args, v string) { a.Config.RESTAPIPort = atoi(v) }},
	"rest_api_num_threads":         {kind: kindInt32, modelled: true, help: "Number of threads for HTTP/REST API processing (default 4 x CPUs).", set: func(a *Args, v string) { a.Config.RESTAPINumThreads = atoi(v) }},
	"rest_api_timeout_in_ms":       {kind: kindInt32, modelled: true, help: "Timeout for HTTP/REST API calls.", set: func(a *Args, v string) { a.Config.RESTAPITimeout = time.Duration(atoi(v)) * time.Millisecond }},
	"rest_api_enable_cors_support": {kind: kindBool, help: "Enable CORS headers in response."},
	"enable_batching":              {kind: kindBool, modelled: true, help: "enable batching", set: func(a *Args, v string) { a.Config.EnableBatching = v == "true" }},
	"allow_version_labels_for_unavailable_models": {kind: kindBool, help: "Allow unused version labels."},
	"batching_parameters_file":                    {kind: kindString, modelled: true, help: "If non-empty, read an ascii BatchingParameters protobuf from the supplied file name.", set: func(a *Args, v string) { a.Config.BatchingParametersFile = v }},
	"enable_per_model_batching_parameters":        {kind: kindBool, help: "Read batching_params.pbtxt from the SavedModel dir (not modelled)."},
	"model_config_file":                           {kind: kindString, reject: true, help: "Multi-model ModelServerConfig file (not supported by the stand-in)."},
	"model_config_file_poll_wait_seconds":         {kind: kindInt32, help: "Poll interval for model_config_file."},
	"model_name":                                  {kind: kindString, modelled: true, help: "name of model", set: func(a *Args, v string) { a.Config.ModelName = v }},
	"model_base_path":                             {kind: kindString, modelled: true, help: "path to export (required)", set: func(a *Args, v string) { a.Config.ModelBasePath = v }},
	"num_load_threads":                            {kind: kindInt32, help: "Servable load threads."},
	"num_unload_threads":                          {kind: kindInt32, help: "Servable unload threads."},
	"max_num_load_retries":                        {kind: kindInt32, modelled: true, help: "maximum number of times it retries loading a model after the first failure. Default: 5", set: func(a *Args, v string) { a.Config.MaxNumLoadRetries = atoi(v) }},
	"load_retry_interval_micros": {kind: kindInt64, modelled: true, help: "The interval, in microseconds, between each servable load retry. If set negative, it doesn't wait. Default: 1 minute", set: func(a *Args, v string) {
		a.Config.LoadRetryInterval = max(0, time.Duration(atoi64(v))*time.Microsecond)
	}},
	"file_system_poll_wait_seconds":   {kind: kindInt32, help: "Poll interval for new model versions (the stand-in loads once)."},
	"flush_filesystem_caches":         {kind: kindBool, help: "Flush filesystem caches after load."},
	"tensorflow_session_parallelism":  {kind: kindInt64, modelled: true, help: "Number of threads to use for running a Tensorflow session. Auto-configured by default.", set: func(a *Args, v string) { a.Config.SessionParallelism = int(atoi64(v)) }},
	"tensorflow_session_config_file":  {kind: kindString, reject: true, help: "Session ConfigProto file (not supported by the stand-in)."},
	"tensorflow_intra_op_parallelism": {kind: kindInt64, modelled: true, help: "Number of threads to use to parallelize the execution of an individual op. Auto-configured by default.", set: func(a *Args, v string) { a.Config.IntraOpParallelism = int(atoi64(v)) }},
	"tensorflow_inter_op_parallelism": {kind: kindInt64, modelled: true, help: "Controls the number of operators that can be executed simultaneously. Auto-configured by default.", set: func(a *Args, v string) { a.Config.InterOpParallelism = int(atoi64(v)) }},
	"use_alts_credentials":            {kind: kindBool, reject: true, help: "Use Google ALTS credentials (not supported by the stand-in)."},
	"ssl_config_file":                 {kind: kindString, reject: true, help: "SSLConfig file (not supported by the stand-in)."},
	"platform_config_file":            {kind: kindString, reject: true, help: "PlatformConfigMap file (not supported by the stand-in)."},
	"per_process_gpu_memory_fraction": {kind: kindFloat, help: "Fraction of GPU memory per process."},
	"saved_model_tags":                {kind: kindString, help: "Comma-separated set of tags of the meta graph to load."},
	"grpc_channel_arguments":          {kind: kindString, help: "Comma separated gRPC server arguments."},
	"grpc_max_threads":                {kind: kindInt32, modelled: true, help: "Max grpc server threads to handle grpc messages (default 4 x CPUs).", set: func(a *Args, v string) { a.Config.GRPCMaxThreads = atoi(v) }},
	"enable_model_warmup":             {kind: kindBool, modelled: true, help: "Enables model warmup from assets.extra/tf_serving_warmup_requests. Default: true", set: func(a *Args, v string) { a.Config.EnableModelWarmup = v == "true" }},
	"num_request_iterations_for_warmup": {kind: kindInt32, modelled: true, help: "Number of times a request is iterated during warmup replay. Used only if > 0.", set: func(a *Args, v string) {
		if n := atoi(v); n > 0 {
			a.Config.WarmupIterations = n
		}
	}},
	"version":                {kind: kindBool, modelled: true, help: "Display version", set: func(a *Args, v string) { a.Version = v == "true" }},
	"monitoring_config_file": {kind: kindString, modelled: true, help: "If non-empty, read an ascii MonitoringConfig protobuf from the supplied file name", set: func(a *Args, v string) { a.Config.MonitoringConfigFile = v }},
	"remove_unused_fields_from_bundle_metagraph": {kind: kindBool, help: "Trim the MetaGraphDef."},
	"prefer_tflite_model":                        {kind: kindBool, reject: true, help: "Serve model.tflite (not supported by the stand-in)."},
	"num_tflite_pools":                           {kind: kindInt32, help: "TFLite interpreter pools."},
	"num_tflite_interpreters_per_pool":           {kind: kindInt32, help: "TFLite interpreters per pool."},
	"enable_signature_method_name_check":         {kind: kindBool, help: "Check SignatureDef method names."},
	"xla_cpu_compilation_enabled":                {kind: kindBool, help: "Enable XLA:CPU JIT."},
	"enable_profiler":                            {kind: kindBool, help: "Enable profiler service."},
	"thread_pool_factory_config_file":            {kind: kindString, help: "ThreadPoolConfig file."},
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func atoi64(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// ParseArgs parses a tensorflow_model_server command line (without the
// program name) the way TF's flag parser does: only --name=value (and
// --name for booleans, true/false/1/0 otherwise); later flags override
// earlier ones; an argument that matches no flag is collected in Unknown,
// not an error; a value that does not parse for its flag's type is an
// error naming the flag, as TF refuses to start then.
func ParseArgs(args []string) (Args, error) {
	a := Args{Config: DefaultConfig()}
	a.Config.EnableModelWarmup = true // TF's default
	for _, arg := range args {
		name, value, hasValue, ok := splitFlag(arg)
		if !ok {
			a.Unknown = append(a.Unknown, arg)
			continue
		}
		def, known := flagDefs[name]
		if !known {
			a.Unknown = append(a.Unknown, arg)
			continue
		}
		if !hasValue && def.kind != kindBool {
			// TF matches "--name=" for valued flags: "--port 8500" is
			// two unknown arguments.
			a.Unknown = append(a.Unknown, arg)
			continue
		}
		v, err := checkValue(def.kind, value, hasValue)
		if err != nil {
			//lint:ignore ST1005 the text is TensorFlow Serving's own, which the emulator reproduces.
			return a, fmt.Errorf("%w: Couldn't interpret value %s for flag %s.", ErrConfig, strconv.Quote(value), name)
		}
		if def.reject && v != "" && v != "false" {
			a.RejectedOptions = append(a.RejectedOptions, name)
		}
		if !def.modelled && !def.reject {
			a.Unsupported = append(a.Unsupported, "--"+name+"="+v)
		}
		if def.set != nil {
			def.set(&a, v)
		}
	}
	return a, nil
}

// splitFlag splits "--name=value" or "--name"; ok is false for anything
// that is not a double-dash flag.
func splitFlag(arg string) (name, value string, hasValue, ok bool) {
	if !strings.HasPrefix(arg, "--") || len(arg) == 2 {
		return "", "", false, false
	}
	body := arg[2:]
	if i := strings.IndexByte(body, '='); i >= 0 {
		return body[:i], body[i+1:], true, true
	}
	return body, "", false, true
}

// checkValue validates a value for a flag kind and normalises booleans to
// "true"/"false".
func checkValue(kind flagKind, value string, hasValue bool) (string, error) {
	if !hasValue {
		if kind == kindBool {
			return "true", nil
		}
		return "", fmt.Errorf("missing value")
	}
	switch kind {
	case kindBool:
		switch value {
		case "true", "1":
			return "true", nil
		case "false", "0":
			return "false", nil
		}
		return "", fmt.Errorf("not a bool")
	case kindInt32:
		_, err := strconv.ParseInt(value, 10, 32)
		return value, err
	case kindInt64:
		_, err := strconv.ParseInt(value, 10, 64)
		return value, err
	case kindFloat:
		_, err := strconv.ParseFloat(value, 32)
		return value, err
	}
	return value, nil
}

// EntrypointArgs is what TF Serving's Docker image entrypoint runs:
// --port=8500 --rest_api_port=8501 --model_name=${MODEL_NAME}
// --model_base_path=${MODEL_BASE_PATH}/${MODEL_NAME} followed by the
// container's arguments, with the image's defaults MODEL_NAME=model and
// MODEL_BASE_PATH=/models.
func EntrypointArgs(getenv func(string) string, rest []string) []string {
	name := getenv("MODEL_NAME")
	if name == "" {
		name = "model"
	}
	base := getenv("MODEL_BASE_PATH")
	if base == "" {
		base = "/models"
	}
	return append([]string{
		"--port=8500", "--rest_api_port=8501",
		"--model_name=" + name, "--model_base_path=" + base + "/" + name,
	}, rest...)
}

// Usage lists the flags like TF's usage text.
func Usage(prog string) string {
	names := make([]string, 0, len(flagDefs))
	for n := range flagDefs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\nFlags:\n", prog)
	kinds := map[flagKind]string{kindBool: "bool", kindInt32: "int32", kindInt64: "int64", kindFloat: "float", kindString: "string"}
	for _, n := range names {
		d := flagDefs[n]
		note := ""
		if !d.modelled && !d.reject {
			note = " [accepted, not modelled by tfs-emulator]"
		}
		if d.reject {
			note = " [not supported by tfs-emulator]"
		}
		fmt.Fprintf(&b, "\t--%s=%s\t%s%s\n", n, kinds[d.kind], d.help, note)
	}
	return b.String()
}
