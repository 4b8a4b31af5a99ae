// Command fakeserver is the runtime tests' own small TF Serving look-alike:
// it takes tensorflow_model_server's flags, refuses a bad batching.config the
// way TF does (a "Failed to start server" line and a non-zero exit), opens
// the gRPC (ModelService.GetModelStatus) and REST ports only after a load
// delay, serves the Prometheus path from the monitoring config, and reports
// what it was started with at GET /fake/state so tests can assert that the
// runtime passed the trial's files and flags through.
//
// Test-only flags, which TF Serving would print and ignore:
//
//	--fake_load_delay=DUR   sleep before opening the ports (a model load)
//	--fake_crash_after=DUR  exit with status 3 this long after the ports open
//	--fake_ignore_term      ignore SIGTERM (tests the SIGKILL escalation)
//
// As in TF Serving's image, MODEL_NAME and MODEL_BASE_PATH from the
// environment stand in for --model_name and --model_base_path
// (MODEL_BASE_PATH/MODEL_NAME), and the ports default to 8500 and 8501.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tfserving"
)

type state struct {
	Args          []string `json:"args"`
	ModelName     string   `json:"model_name"`
	ModelBasePath string   `json:"model_base_path"`
	Batching      string   `json:"batching"`
	IntraOp       string   `json:"intra_op"`
	InterOp       string   `json:"inter_op"`
	Env           []string `json:"env"`
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "Failed to start server. Error: "+format+"\n", args...)
	return 1
}

func run(args []string) int {
	flags := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			fmt.Fprintf(os.Stderr, "ignoring argument %q\n", a)
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			value = "true"
		}
		flags[name] = value // the last occurrence wins, as in TF's parser
	}
	get := func(name, def string) string {
		if v, ok := flags[name]; ok {
			return v
		}
		return def
	}
	dur := func(name string) time.Duration {
		d, _ := time.ParseDuration(get(name, "0s"))
		return d
	}

	st := state{Args: args, Env: os.Environ()}
	st.ModelName = get("model_name", os.Getenv("MODEL_NAME"))
	st.ModelBasePath = get("model_base_path", "")
	if st.ModelBasePath == "" && os.Getenv("MODEL_BASE_PATH") != "" {
		st.ModelBasePath = filepath.Join(os.Getenv("MODEL_BASE_PATH"), st.ModelName)
	}
	st.IntraOp = get("tensorflow_intra_op_parallelism", "")
	st.InterOp = get("tensorflow_inter_op_parallelism", "")
	fmt.Fprintf(os.Stderr, "fakeserver starting with %d flags, model %q at %q\n", len(args), st.ModelName, st.ModelBasePath)

	if st.ModelName == "" {
		return fail("INVALID_ARGUMENT: --model_name is required")
	}
	if st.ModelBasePath != "" {
		if _, err := os.Stat(st.ModelBasePath); err != nil {
			return fail("NOT_FOUND: Could not find base path %s for servable %s", st.ModelBasePath, st.ModelName)
		}
	}
	if f := get("batching_parameters_file", ""); f != "" {
		if get("enable_batching", "false") != "true" {
			return fail("INVALID_ARGUMENT: --batching_parameters_file requires --enable_batching")
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return fail("NOT_FOUND: %v", err)
		}
		p, err := configs.DecodeBatching(data)
		if err == nil {
			err = configs.ValidateBatching(p)
		}
		if err != nil {
			return fail("INVALID_ARGUMENT: %s: %v", f, err)
		}
		st.Batching = string(data)
	}
	metricsPath := ""
	if f := get("monitoring_config_file", ""); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return fail("NOT_FOUND: %v", err)
		}
		var mc tfserving.MonitoringConfig
		if err := prototext.Unmarshal(data, &mc); err != nil {
			return fail("INVALID_ARGUMENT: %s: %v", f, err)
		}
		if mc.GetPrometheusConfig().GetEnable() {
			metricsPath = mc.GetPrometheusConfig().GetPath()
		}
	}

	sigs := make(chan os.Signal, 1)
	if get("fake_ignore_term", "false") == "true" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	}

	time.Sleep(dur("fake_load_delay"))

	grpcPort, _ := strconv.Atoi(get("port", "8500"))
	restPort, _ := strconv.Atoi(get("rest_api_port", "8501"))
	gl, err := net.Listen("tcp", fmt.Sprintf(":%d", grpcPort))
	if err != nil {
		return fail("UNKNOWN: %v", err)
	}
	rl, err := net.Listen("tcp", fmt.Sprintf(":%d", restPort))
	if err != nil {
		return fail("UNKNOWN: %v", err)
	}

	gs := grpc.NewServer()
	tfserving.RegisterModelServiceServer(gs, &models{name: st.ModelName})
	go gs.Serve(gl)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") != st.ModelName {
			http.Error(w, `{"error":"Servable not found"}`, http.StatusNotFound)
			return
		}
		fmt.Fprint(w, `{"model_version_status":[{"version":"1","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}}]}`)
	})
	mux.HandleFunc("GET /fake/state", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(st)
	})
	if metricsPath != "" {
		mux.HandleFunc("GET "+metricsPath, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "# TYPE :tensorflow:serving:request_count counter\n:tensorflow:serving:request_count{model_name=%q,status=\"OK\"} 0\n", st.ModelName)
		})
	}
	hs := &http.Server{Handler: mux}
	go hs.Serve(rl)
	fmt.Fprintf(os.Stderr, "Running gRPC ModelServer at 0.0.0.0:%d ...\n", grpcPort)
	fmt.Fprintf(os.Stderr, "Exporting HTTP/REST API at:localhost:%d ...\n", restPort)

	var crash <-chan time.Time
	if d := dur("fake_crash_after"); d > 0 {
		crash = time.After(d)
	}
	select {
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "received %v, shutting down\n", s)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		gs.Stop()
		return 0
	case <-crash:
		fmt.Fprintln(os.Stderr, "F0000 fakeserver: simulated crash: device lost")
		return 3
	}
}

type models struct {
	tfserving.UnimplementedModelServiceServer
	name string
}

func (m *models) GetModelStatus(_ context.Context, req *tfserving.GetModelStatusRequest) (*tfserving.GetModelStatusResponse, error) {
	return &tfserving.GetModelStatusResponse{ModelVersionStatus: []*tfserving.ModelVersionStatus{{
		Version: 1,
		State:   tfserving.ModelVersionStatus_AVAILABLE,
		Status:  &tfserving.StatusProto{},
	}}}, nil
}
