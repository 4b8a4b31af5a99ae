package emulator

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/emulator/warmup"
	"github.com/batchtune/batchtune/tfserving"
)

func TestPredictChecks(t *testing.T) {
	r := start(t, Config{ModelBasePath: testModel(t, mlpJSON), EnableBatching: true})
	dense := floatInput(2, 3, 0.5)
	ids := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_INT64,
		TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: 2}, {Size: 2}}},
		Int64Val:    []int64{1, 2, 3, 4}}
	spec := &tfserving.ModelSpec{Name: "m"}
	tests := []struct {
		name string
		req  *tfserving.PredictRequest
		code codes.Code
		msg  string // exact TF-style message
	}{
		{
			// The model name must be the served one.
			name: "unknown model",
			req:  &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: "x"}, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": ids}},
			code: codes.NotFound, msg: "Servable not found for request: Latest(x)",
		},
		{
			// A version other than the loaded one.
			name: "unknown version",
			req: &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: "m", VersionChoice: &tfserving.ModelSpec_Version{Version: wrapperspb.Int64(2)}},
				Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": ids}},
			code: codes.NotFound, msg: "Servable not found for request: Specific(m, 2)",
		},
		{
			// TF answers FAILED_PRECONDITION for an unknown signature.
			name: "unknown signature",
			req:  &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: "m", SignatureName: "nope"}, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": ids}},
			code: codes.FailedPrecondition, msg: `Serving signature key "nope" not found.`,
		},
		{
			// Too few inputs.
			name: "missing input",
			req:  &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": dense}},
			code: codes.InvalidArgument, msg: "input size does not match signature: 1!=2 len({dense}) != len({dense,ids}). Sent extra: {}. Missing but required: {ids}.",
		},
		{
			// Right count, wrong name.
			name: "wrong input name",
			req:  &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "idz": ids}},
			code: codes.InvalidArgument, msg: "input tensor alias not found in signature: idz. Inputs expected to be in the set {dense,ids}.",
		},
		{
			// A dtype other than the signature's, as the session reports it.
			name: "wrong dtype",
			req: &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": {
				Dtype: tfserving.DataType_DT_FLOAT, TensorShape: ids.TensorShape, FloatVal: []float32{1, 2, 3, 4}}}},
			code: codes.InvalidArgument, msg: "Expects arg[1] to be int64 but float is provided",
		},
		{
			// A row width other than the signature's.
			name: "wrong shape",
			req:  &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": floatInput(2, 4, 0), "ids": ids}},
			code: codes.InvalidArgument, msg: "input 'dense': shape [2,4] is not compatible with the signature's [-1,3]",
		},
		{
			// BatchingSession's rule: inputs share the batch dimension.
			name: "unequal batch dimensions",
			req:  &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": floatInput(1, 3, 0), "ids": ids}},
			code: codes.InvalidArgument, msg: "Batching Run() input tensors must have equal 0th-dimension size",
		},
		{
			// tensor_content that does not fit the shape.
			name: "bad tensor_content",
			req: &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": {
				Dtype: tfserving.DataType_DT_FLOAT, TensorShape: dense.TensorShape, TensorContent: []byte{1, 2, 3}}, "ids": ids}},
			code: codes.InvalidArgument, msg: "input 'dense': bad content: tensor_content has 3 bytes, shape [2,3] of float needs 24",
		},
		{
			// An output filter naming no output.
			name: "unknown output filter",
			req:  &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": ids}, OutputFilter: []string{"z"}},
			code: codes.InvalidArgument, msg: "output tensor alias not found in signature: z Outputs expected to be in the set {a,b}.",
		},
		{
			// The same output twice.
			name: "duplicate output filter",
			req:  &tfserving.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": ids}, OutputFilter: []string{"a", "a"}},
			code: codes.InvalidArgument, msg: "duplicate output tensor alias: a",
		},
	}
	for _, tt := range tests {
		_, err := r.predict.Predict(context.Background(), tt.req)
		st := status.Convert(err)
		if st.Code() != tt.code || st.Message() != tt.msg {
			t.Errorf("%s: got %v %q\nwant %v %q", tt.name, st.Code(), st.Message(), tt.code, tt.msg)
		}
	}
}

func TestPredictAnswers(t *testing.T) {
	r := start(t, Config{ModelBasePath: testModel(t, mlpJSON), EnableBatching: true})
	ids := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_INT64,
		TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: 2}, {Size: 2}}},
		Int64Val:    []int64{1, 2, 3, 4}}
	dense := floatInput(2, 3, 0.5)
	content := make([]byte, 0, 24)
	for _, v := range dense.FloatVal {
		content = binary.LittleEndian.AppendUint32(content, math.Float32bits(v))
	}
	asContent := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: dense.TensorShape, TensorContent: content}

	byVal, err := r.predict.Predict(context.Background(), &tfserving.PredictRequest{
		ModelSpec: &tfserving.ModelSpec{Name: "m"}, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": ids}})
	if err != nil {
		t.Fatal(err)
	}
	byContent, err := r.predict.Predict(context.Background(), &tfserving.PredictRequest{
		ModelSpec: &tfserving.ModelSpec{Name: "m"}, Inputs: map[string]*tfserving.TensorProto{"dense": asContent, "ids": ids}})
	if err != nil {
		t.Fatal(err)
	}
	// *_val and tensor_content carry the same numbers: same answer.
	if diff := cmp.Diff(byVal, byContent, protocmp.Transform()); diff != "" {
		t.Errorf("float_val vs tensor_content answers (-val +content)\n%s", diff)
	}
	wantSpec := &tfserving.ModelSpec{Name: "m", VersionChoice: &tfserving.ModelSpec_Version{Version: wrapperspb.Int64(1)}, SignatureName: "serving_default"}
	if diff := cmp.Diff(wantSpec, byVal.GetModelSpec(), protocmp.Transform()); diff != "" {
		t.Errorf("model spec (-want +got)\n%s", diff)
	}
	shapes := map[string][]int64{}
	for name, tp := range byVal.GetOutputs() {
		var dims []int64
		for _, d := range tp.GetTensorShape().GetDim() {
			dims = append(dims, d.GetSize())
		}
		shapes[name] = dims
		if int64(len(tp.GetFloatVal())) != dims[0]*dims[1] {
			t.Errorf("output %s: %d values for shape %v", name, len(tp.GetFloatVal()), dims)
		}
	}
	if diff := cmp.Diff(map[string][]int64{"a": {2, 1}, "b": {2, 2}}, shapes); diff != "" {
		t.Errorf("output shapes (-want +got)\n%s", diff)
	}
	// The output filter returns only what is asked for.
	filtered, err := r.predict.Predict(context.Background(), &tfserving.PredictRequest{
		ModelSpec: &tfserving.ModelSpec{Name: "m"}, Inputs: map[string]*tfserving.TensorProto{"dense": dense, "ids": ids}, OutputFilter: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(byVal.GetOutputs()["b"], filtered.GetOutputs()["b"], protocmp.Transform()); diff != "" || len(filtered.GetOutputs()) != 1 {
		t.Errorf("filtered outputs %v (-all +filtered)\n%s", filtered.GetOutputs(), diff)
	}
	// The other signature feeds the same network from one input.
	other, err := r.predict.Predict(context.Background(), &tfserving.PredictRequest{
		ModelSpec: &tfserving.ModelSpec{Name: "m", SignatureName: "other"}, Inputs: map[string]*tfserving.TensorProto{"all": floatInput(1, 5, 0)}})
	if err != nil || len(other.GetOutputs()["c"].GetFloatVal()) != 3 {
		t.Errorf("other signature: %v %v", other, err)
	}
}

func TestStatusAndMetadata(t *testing.T) {
	r := start(t, Config{ModelBasePath: testModel(t, accelJSON)})
	st, err := r.models.GetModelStatus(context.Background(), &tfserving.GetModelStatusRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	want := &tfserving.GetModelStatusResponse{ModelVersionStatus: []*tfserving.ModelVersionStatus{{Version: 1, State: tfserving.ModelVersionStatus_AVAILABLE, Status: &tfserving.StatusProto{}}}}
	if diff := cmp.Diff(want, st, protocmp.Transform()); diff != "" {
		t.Errorf("GetModelStatus (-want +got)\n%s", diff)
	}
	if _, err := r.models.GetModelStatus(context.Background(), &tfserving.GetModelStatusRequest{ModelSpec: &tfserving.ModelSpec{Name: "x"}}); status.Code(err) != codes.NotFound {
		t.Errorf("status of unknown model: %v, want NOT_FOUND", err)
	}
	md, err := r.predict.GetModelMetadata(context.Background(), &tfserving.GetModelMetadataRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"}, MetadataField: []string{"signature_def"}})
	if err != nil {
		t.Fatal(err)
	}
	var sigs tfserving.SignatureDefMap
	if err := md.GetMetadata()["signature_def"].UnmarshalTo(&sigs); err != nil {
		t.Fatal(err)
	}
	in := sigs.GetSignatureDef()["serving_default"].GetInputs()["x"]
	if in.GetName() != "x:0" || in.GetDtype() != tfserving.DataType_DT_FLOAT || len(in.GetTensorShape().GetDim()) != 2 || in.GetTensorShape().GetDim()[1].GetSize() != 4 {
		t.Errorf("signature input x = %v", in)
	}
	if _, err := r.predict.GetModelMetadata(context.Background(), &tfserving.GetModelMetadataRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("metadata without fields: %v, want INVALID_ARGUMENT", err)
	}

	// REST.
	for _, tt := range []struct {
		path, want string
		code       int
	}{
		{"/v1/models/m", `"state": "AVAILABLE"`, 200},
		{"/v1/models/m/versions/1", `"version": "1"`, 200},
		{"/v1/models/m/versions/7", `"error": "Could not find version 7 of model m"`, 404},
		{"/v1/models/x", `"error": "Could not find any versions of model x"`, 404},
		{"/v1/models/m/metadata", `"name": "x:0"`, 200},
	} {
		resp, err := http.Get(r.rest + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
			t.Errorf("GET %s: HTTP %d %s\nwant %d containing %s", tt.path, resp.StatusCode, body, tt.code, tt.want)
		}
	}
}

func TestREST(t *testing.T) {
	one := start(t, Config{ModelBasePath: testModel(t, accelJSON), EnableBatching: true})
	two := start(t, Config{ModelBasePath: testModel(t, mlpJSON), EnableBatching: true})
	tests := []struct {
		name string
		r    *running
		body string
		code int
		want string // substring of the answer
	}{
		// Row format, one input: bare rows; one output: bare rows back.
		{"row single input", one, `{"instances": [[1,2,3,4],[5,6,7,8]]}`, 200, `"predictions": [`},
		// Row format, one input, named.
		{"row named", one, `{"instances": [{"x": [1,2,3,4]}]}`, 200, `"predictions": [`},
		// Columnar format, one input.
		{"columnar single input", one, `{"inputs": [[1,2,3,4]]}`, 200, `"outputs": [`},
		// Row format, two inputs, two outputs: objects both ways.
		{"row two inputs", two, `{"instances": [{"dense": [1,2,3], "ids": [4,5]}]}`, 200, `"a": [`},
		// Columnar format, two inputs, two outputs.
		{"columnar two inputs", two, `{"inputs": {"dense": [[1,2,3]], "ids": [[4,5]]}}`, 200, `"b": [`},
		// Integer inputs must be integral.
		{"non-integral id", two, `{"instances": [{"dense": [1,2,3], "ids": [4.5,5]}]}`, 400, `not int64`},
		// A missing named input.
		{"row missing input", two, `{"instances": [{"dense": [1,2,3]}]}`, 400, `does not have named input: ids`},
		// Ragged instances.
		{"ragged", one, `{"instances": [[1,2,3,4],[5,6,7]]}`, 400, `"error": "input 'x'`},
		// Both formats at once.
		{"both formats", one, `{"instances": [[1,2,3,4]], "inputs": [[1,2,3,4]]}`, 400, `Not both`},
		// Neither.
		{"no inputs", one, `{"signature_name": "serving_default"}`, 400, `Missing 'inputs' or 'instances' key`},
		// Not JSON.
		{"not json", one, `{"instances": [`, 400, `JSON Parse error`},
		// Unknown signature.
		{"unknown signature", one, `{"signature_name": "s", "instances": [[1,2,3,4]]}`, 400, `Serving signature key \"s\" not found.`},
	}
	for _, tt := range tests {
		resp, err := http.Post(tt.r.rest+"/v1/models/m:predict", "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s: HTTP %d %s\nwant %d containing %s", tt.name, resp.StatusCode, body, tt.code, tt.want)
		}
	}
	// REST and gRPC agree on the numbers.
	resp, err := http.Post(one.rest+"/v1/models/m:predict", "application/json", strings.NewReader(`{"inputs": [[1,2,3,4]]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g, err := one.predict.Predict(context.Background(), &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"},
		Inputs: map[string]*tfserving.TensorProto{"x": {Dtype: tfserving.DataType_DT_FLOAT,
			TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: 1}, {Size: 4}}}, FloatVal: []float32{1, 2, 3, 4}}}})
	if err != nil {
		t.Fatal(err)
	}
	score := g.GetOutputs()["score"].GetFloatVal()[0]
	if !strings.Contains(string(body), strings.TrimRight(strings.TrimRight(formatFloat(score), "0"), ".")) {
		t.Errorf("REST answer %s does not carry the gRPC score %v", body, score)
	}
}

func formatFloat(f float32) string {
	b, _ := jsonMarshal(float64(f))
	return string(b)
}

// TestMetrics checks the exported values after known traffic, parsed back
// with expfmt: request counts by status, latency count, batch sizes.
func TestMetrics(t *testing.T) {
	batching := writeFile(t, "batching.config", "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\nnum_batch_threads { value: 1 }\nallowed_batch_sizes: 4\nallowed_batch_sizes: 8\n")
	r := start(t, Config{ModelBasePath: testModel(t, accelJSON), EnableBatching: true, BatchingParametersFile: batching})
	for i := 0; i < 3; i++ {
		// 3 sequential requests of 3 rows: each its own batch, padded to 4.
		if _, err := r.predict.Predict(context.Background(), &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"},
			Inputs: map[string]*tfserving.TensorProto{"x": floatInput(3, 4, 0)}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := r.predict.Predict(context.Background(), &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"},
		Inputs: map[string]*tfserving.TensorProto{"x": floatInput(9, 4, 0)}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "Task size 9 is larger than maximum input batch size 8" {
		t.Errorf("oversized request: %v", err)
	}
	fams := r.scrape(t)
	checks := []struct {
		name   string
		labels map[string]string
		get    func(*dtoMetric) float64
		want   float64
	}{
		{MetricRequestCount, map[string]string{"model_name": "m", "status": "OK"}, counter, 3},
		{MetricRequestCount, map[string]string{"model_name": "m", "status": "INVALID_ARGUMENT"}, counter, 1},
		{MetricRequestLatency, map[string]string{"model_name": "m", "API": "Predict", "entrypoint": "GRPC"}, histCount, 4},
		{MetricProcessedBatchSize, nil, histCount, 3},
		{MetricProcessedBatchSize, nil, histSum, 12},
		{MetricPaddingSize, map[string]string{"execution_batch_size": "4"}, histSum, 3},
		{MetricQueuingLatency, map[string]string{"thread_pool_name": "batch_threads"}, histCount, 3},
		{MetricInputBatchSize, nil, histSum, 18}, // recorded before scheduling, as TF does: the refused 9 rows count
	}
	for _, c := range checks {
		m := metric(fams, c.name, c.labels)
		if m == nil {
			t.Errorf("%s%v: missing", c.name, c.labels)
			continue
		}
		if got := c.get(m); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Latency is in microseconds: each request took at least the 2 ms
	// device time.
	lat := metric(fams, MetricRequestLatency, map[string]string{"entrypoint": "GRPC"})
	if s := histSum(lat); s < 3*2000 {
		t.Errorf("request_latency sum = %v µs, less than 3 requests x 2000 µs of device time", s)
	}
}

func TestMonitoringOff(t *testing.T) {
	r := start(t, Config{ModelBasePath: testModel(t, accelJSON), MonitoringConfigFile: writeFile(t, "m.config", "")})
	resp, err := http.Get(r.rest + DefaultMonitoringPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("metrics without prometheus_config: HTTP %d, want 404", resp.StatusCode)
	}
}

func TestStartErrors(t *testing.T) {
	good := testModel(t, accelJSON)
	tests := []struct {
		name  string
		cfg   Config
		code  codes.Code
		want  error
		parts []string
	}{
		{"no base path", Config{}, codes.InvalidArgument, ErrConfig, []string{"model_base_path"}},
		{"parallelism conflict", Config{ModelBasePath: good, SessionParallelism: 2, IntraOpParallelism: 1}, codes.InvalidArgument, ErrConfig,
			[]string{"Either configure server_options.tensorflow_session_parallelism or (server_options.tensorflow_intra_op_parallelism, server_options.tensorflow_inter_op_parallelism). Both can not be set."}},
		{"batching file without batching", Config{ModelBasePath: good, BatchingParametersFile: "b.config"}, codes.InvalidArgument, ErrConfig,
			[]string{"batching_parameters_file is set without setting server_options.enable_batching to true."}},
		{"batching file missing", Config{ModelBasePath: good, EnableBatching: true, BatchingParametersFile: "/nonexistent/b.config"}, codes.NotFound, ErrConfig,
			[]string{"/nonexistent/b.config"}},
		{"batching syntax", Config{ModelBasePath: good, EnableBatching: true, BatchingParametersFile: writeFile(t, "b.config", "max_batch_size { value: 8 }\nmax_batch_sise { value: 9 }\n")},
			codes.InvalidArgument, ErrConfig, []string{"Invalid protobuf file", "b.config", "line 2", "max_batch_sise"}},
		{"batching json", Config{ModelBasePath: good, EnableBatching: true, BatchingParametersFile: writeFile(t, "b.config", `{"max_batch_size": 8}`)},
			codes.InvalidArgument, ErrConfig, []string{"b.config", "JSON"}},
		{"batching values", Config{ModelBasePath: good, EnableBatching: true, BatchingParametersFile: writeFile(t, "b.config", "max_batch_size { value: 8 }\nallowed_batch_sizes: 4\nbatch_timeout_micros { value: -1 }\n")},
			codes.InvalidArgument, ErrLoad, []string{"b.config", "allowed_batch_sizes[0]: last entry must equal max_batch_size (8), got 4", "batch_timeout_micros"}},
		{"missing base path", Config{ModelBasePath: "/nonexistent/model"}, codes.NotFound, ErrConfig,
			[]string{"Could not find base path /nonexistent/model for servable m"}},
		{"bad description", Config{ModelBasePath: testModel(t, strings.Replace(accelJSON, `"item_us": 1`, `"item_us": -1`, 1))}, codes.InvalidArgument, ErrLoad,
			[]string{"model.json:", "accelerator.item_us: must be positive"}},
		{"oom at load", Config{ModelBasePath: good, EnableBatching: true, BatchingParametersFile: writeFile(t, "b.config", "max_batch_size { value: 2001 }\n")},
			codes.ResourceExhausted, ErrLoad, []string{"OOM when allocating tensor with shape[2001,4]", "largest batch that fits: 2000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.ModelName = "m"
			cfg.Port = 1 // never reached: every case fails before listening
			_, err := Start(context.Background(), cfg)
			var se *StartError
			if !errors.As(err, &se) || se.Code != tt.code || !errors.Is(err, tt.want) {
				t.Fatalf("Start error %v, want %v %v", err, tt.code, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			for _, p := range tt.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not contain %q", err, p)
				}
			}
		})
	}
}

// TestLoadRetries: a load failure is retried max_num_load_retries times,
// load_retry_interval apart; a configuration error is not retried.
func TestLoadRetries(t *testing.T) {
	rec := &logRecorder{}
	cfg := Config{ModelName: "m", Port: 1, ModelBasePath: testModel(t, accelJSON), EnableBatching: true,
		BatchingParametersFile: writeFile(t, "b.config", "max_batch_size { value: 5000 }\n"),
		MaxNumLoadRetries:      2, LoadRetryInterval: 50 * time.Millisecond, Logger: slogNew(rec)}
	begin := time.Now()
	_, err := Start(context.Background(), cfg)
	if !errors.Is(err, ErrLoad) {
		t.Fatalf("Start = %v, want a load error", err)
	}
	if n := rec.count("Loading servable failed"); n != 3 {
		t.Errorf("%d failed load attempts, want 1 + 2 retries", n)
	}
	if took := time.Since(begin); took < 100*time.Millisecond {
		t.Errorf("3 attempts took %v, less than 2 retry intervals", took)
	}
	rec2 := &logRecorder{}
	cfg.ModelBasePath, cfg.Logger = "/nonexistent", slogNew(rec2)
	if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) || rec2.count("Loading servable failed") != 0 {
		t.Errorf("missing base path: %v after %d attempts logged, want a config error, no retries", err, rec2.count("Loading servable failed"))
	}
}

// TestWarmupReplays: with warmup on, the warmup file's requests run
// through the batch scheduler before the server opens its ports.
func TestWarmupReplays(t *testing.T) {
	base := testModel(t, accelJSON)
	reqs := []*tfserving.PredictRequest{
		{ModelSpec: &tfserving.ModelSpec{Name: "whatever"}, Inputs: map[string]*tfserving.TensorProto{"x": floatInput(1, 4, 0)}},
		{ModelSpec: &tfserving.ModelSpec{Name: "whatever"}, Inputs: map[string]*tfserving.TensorProto{"x": floatInput(3, 4, 0)}},
	}
	writeWarmup(t, base, reqs)
	r := start(t, Config{ModelBasePath: base, EnableBatching: true, EnableModelWarmup: true, WarmupIterations: 2})
	fams := r.scrape(t)
	if m := metric(fams, MetricProcessedBatchSize, nil); histCount(m) != 4 || histSum(m) != 8 {
		t.Errorf("after warmup: %v batches of %v rows, want 4 batches (2 records x 2 iterations) of 8 rows", histCount(m), histSum(m))
	}
	if m := metric(fams, MetricRequestCount, nil); m != nil {
		t.Errorf("warmup counted as requests: %v", m)
	}

	// A broken warmup file fails the load.
	bad := testModel(t, accelJSON)
	writeWarmup(t, bad, []*tfserving.PredictRequest{{Inputs: map[string]*tfserving.TensorProto{"y": floatInput(1, 4, 0)}}})
	_, err := Start(context.Background(), Config{ModelName: "m", Port: 1, ModelBasePath: bad, EnableModelWarmup: true})
	if !errors.Is(err, ErrWarmup) || !strings.Contains(err.Error(), "tf_serving_warmup_requests: record 0: input tensor alias not found in signature: y") {
		t.Errorf("bad warmup: %v", err)
	}
}

func writeWarmup(t *testing.T, base string, reqs []*tfserving.PredictRequest) {
	t.Helper()
	var buf strings.Builder
	if err := warmup.Write(&buf, reqs); err != nil {
		t.Fatal(err)
	}
	p := base + "/1/" + warmup.FileName
	mkdirWrite(t, p, buf.String())
}
