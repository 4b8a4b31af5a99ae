package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/tensor"
	"github.com/batchtune/batchtune/tfserving"
)

// maxRESTBody bounds a REST request body.
const maxRESTBody = 256 << 20

// restHandler serves TF Serving's REST API and, when the monitoring config
// enables it, the Prometheus metrics.
func (s *Server) restHandler(monitoring *tfserving.MonitoringConfig, threads int) http.Handler {
	mux := http.NewServeMux()
	sem := make(chan struct{}, threads)
	mux.Handle("/v1/models/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-sem }()
		s.serveModels(w, r)
	}))
	if pc := monitoring.GetPrometheusConfig(); pc.GetEnable() {
		path := pc.GetPath()
		if path == "" {
			path = DefaultMonitoringPath
		}
		mux.Handle(path, s.metrics.handler())
	}
	return mux
}

// restError writes TF's {"error": "..."} body with the code's HTTP status.
func restError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	writeJSON(w, httpStatus(st.Code()), map[string]string{"error": st.Message()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, "{ \"error\": %q }\n", err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// serveModels routes /v1/models/NAME[/versions/N][/metadata|:predict].
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/models/")
	verb := ""
	if i := strings.LastIndex(rest, ":"); i >= 0 {
		rest, verb = rest[:i], rest[i+1:]
	}
	parts := strings.Split(rest, "/")
	spec := &tfserving.ModelSpec{Name: parts[0]}
	parts = parts[1:]
	if len(parts) >= 2 && parts[0] == "versions" {
		v, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			restError(w, status.Errorf(codes.InvalidArgument, "Failed to convert version: %s to numeric.", parts[1]))
			return
		}
		spec.VersionChoice = &tfserving.ModelSpec_Version{Version: wrapperspb.Int64(v)}
		parts = parts[2:]
	} else if len(parts) >= 2 && parts[0] == "labels" {
		spec.VersionChoice = &tfserving.ModelSpec_VersionLabel{VersionLabel: parts[1]}
		parts = parts[2:]
	}
	switch {
	case spec.Name == "":
		restError(w, status.Error(codes.InvalidArgument, "Missing model name in request."))
	case verb == "" && len(parts) == 0 && r.Method == http.MethodGet:
		s.restStatus(w, spec)
	case verb == "" && len(parts) == 1 && parts[0] == "metadata" && r.Method == http.MethodGet:
		s.restMetadata(w, spec)
	case verb == "predict" && len(parts) == 0 && r.Method == http.MethodPost:
		s.restPredict(w, r, spec)
	case (verb == "classify" || verb == "regress") && len(parts) == 0 && r.Method == http.MethodPost:
		restError(w, status.Errorf(codes.Unimplemented, "%s is not supported by the stand-in; use :predict", verb))
	default:
		restError(w, status.Errorf(codes.InvalidArgument, "Malformed request: %s %s", r.Method, r.URL.Path))
	}
}

func (s *Server) restStatus(w http.ResponseWriter, spec *tfserving.ModelSpec) {
	if spec.GetVersionLabel() != "" {
		restError(w, status.Errorf(codes.InvalidArgument, "Unrecognized servable version label: %s", spec.GetVersionLabel()))
		return
	}
	resp, err := s.modelStatus(spec)
	if err != nil {
		restError(w, err)
		return
	}
	type statusJSON struct {
		ErrorCode    string `json:"error_code"`
		ErrorMessage string `json:"error_message"`
	}
	type versionJSON struct {
		Version string     `json:"version"`
		State   string     `json:"state"`
		Status  statusJSON `json:"status"`
	}
	var out struct {
		ModelVersionStatus []versionJSON `json:"model_version_status"`
	}
	for _, v := range resp.GetModelVersionStatus() {
		out.ModelVersionStatus = append(out.ModelVersionStatus, versionJSON{
			Version: strconv.FormatInt(v.GetVersion(), 10),
			State:   v.GetState().String(),
			Status:  statusJSON{ErrorCode: CodeName(codes.Code(v.GetStatus().GetErrorCode())), ErrorMessage: v.GetStatus().GetErrorMessage()},
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) restMetadata(w http.ResponseWriter, spec *tfserving.ModelSpec) {
	resp, err := s.metadata(spec, []string{"signature_def"})
	if err != nil {
		restError(w, err)
		return
	}
	sigs, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(s.sv.signatureDefs())
	if err != nil {
		restError(w, status.Error(codes.Internal, err.Error()))
		return
	}
	out := map[string]any{
		"model_spec": map[string]string{
			"name":           resp.GetModelSpec().GetName(),
			"signature_name": "",
			"version":        strconv.FormatInt(resp.GetModelSpec().GetVersion().GetValue(), 10),
		},
		"metadata": map[string]json.RawMessage{"signature_def": sigs},
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) restPredict(w http.ResponseWriter, r *http.Request, spec *tfserving.ModelSpec) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RESTAPITimeout)
	defer cancel()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRESTBody))
	if err != nil {
		restError(w, status.Errorf(codes.InvalidArgument, "reading request body: %v", err))
		return
	}
	out, code, err := s.restPredictBody(ctx, spec, body)
	s.record(spec.GetName(), "REST", start, err)
	if err != nil {
		restError(w, err)
		return
	}
	writeJSON(w, code, out)
}

// restRequest is the body of a :predict call: row ("instances") or
// columnar ("inputs") format.
type restRequest struct {
	SignatureName string `json:"signature_name"`
	Instances     any    `json:"instances"`
	Inputs        any    `json:"inputs"`
}

func (s *Server) restPredictBody(ctx context.Context, spec *tfserving.ModelSpec, body []byte) (any, int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var req restRequest
	if err := dec.Decode(&req); err != nil {
		return nil, 0, status.Errorf(codes.InvalidArgument, "JSON Parse error: %v", err)
	}
	spec.SignatureName = req.SignatureName
	_, sig, err := s.sv.resolve(spec)
	if err != nil {
		return nil, 0, err
	}
	var inputs map[string]input
	row := req.Instances != nil
	switch {
	case req.Instances != nil && req.Inputs != nil:
		return nil, 0, status.Error(codes.InvalidArgument, "Not both 'instances' and 'inputs' can be specified in the same request.")
	case row:
		inputs, err = rowInputs(sig, req.Instances)
	case req.Inputs != nil:
		inputs, err = columnInputs(sig, req.Inputs)
	default:
		return nil, 0, status.Error(codes.InvalidArgument, "Missing 'inputs' or 'instances' key")
	}
	if err != nil {
		return nil, 0, err
	}
	pred, err := s.sv.predict(ctx, spec, inputs, nil)
	if err != nil {
		return nil, 0, err
	}
	if row {
		return map[string]any{"predictions": rowOutputs(pred)}, http.StatusOK, nil
	}
	if len(pred.names) == 1 {
		return map[string]any{"outputs": pred.outputs[pred.names[0]].JSON()}, http.StatusOK, nil
	}
	outs := map[string]any{}
	for _, n := range pred.names {
		outs[n] = pred.outputs[n].JSON()
	}
	return map[string]any{"outputs": outs}, http.StatusOK, nil
}

// jsonInput converts one input's JSON value to a tensor of the signature's
// dtype, checking integrality for integer inputs.
func jsonInput(name string, ts model.TensorSpec, v any) (input, error) {
	t, err := tensor.FromJSON(v)
	if err != nil {
		return input{}, status.Errorf(codes.InvalidArgument, "input '%s': %s", name, strings.TrimPrefix(err.Error(), "tensor: "))
	}
	dt := ts.DataType()
	switch dt {
	case tfserving.DataType_DT_FLOAT, tfserving.DataType_DT_DOUBLE, tfserving.DataType_DT_HALF, tfserving.DataType_DT_BOOL:
	default:
		for _, x := range t.Values {
			if x != float32(math.Trunc(float64(x))) {
				return input{}, status.Errorf(codes.InvalidArgument, "input '%s': JSON Value: %v not %s", name, x, tensor.DTypeName(dt))
			}
		}
	}
	return input{dtype: dt, t: t}, nil
}

// rowInputs reads {"instances": [...]}: one element per row, a bare value
// when the signature has one input, else an object of named values.
func rowInputs(sig model.Signature, v any) (map[string]input, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "Expecting 'instances' to be an list/array")
	}
	if len(list) == 0 {
		return nil, status.Error(codes.InvalidArgument, "No values in 'instances' list")
	}
	names := model.Names(sig.Inputs)
	perInput := map[string][]any{}
	for i, inst := range list {
		obj, isObj := inst.(map[string]any)
		if len(names) == 1 && (!isObj || obj[names[0]] == nil) {
			if isObj {
				return nil, status.Errorf(codes.InvalidArgument, "instances[%d]: JSON object: does not have named input: %s", i, names[0])
			}
			perInput[names[0]] = append(perInput[names[0]], inst)
			continue
		}
		if !isObj {
			return nil, status.Errorf(codes.InvalidArgument, "instances[%d]: Expecting object but got list; the signature has inputs {%s}", i, strings.Join(names, ","))
		}
		for k := range obj {
			if _, ok := sig.Inputs[k]; !ok {
				return nil, status.Errorf(codes.InvalidArgument, "instances[%d]: JSON object: has unknown input: %s", i, k)
			}
		}
		for _, n := range names {
			val, ok := obj[n]
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "instances[%d]: JSON object: does not have named input: %s", i, n)
			}
			perInput[n] = append(perInput[n], val)
		}
	}
	inputs := map[string]input{}
	for _, n := range names {
		in, err := jsonInput(n, sig.Inputs[n], perInput[n])
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s (instances must all have the same shape)", status.Convert(err).Message())
		}
		inputs[n] = in
	}
	return inputs, nil
}

// columnInputs reads {"inputs": ...}: the whole tensor, or an object of
// named tensors.
func columnInputs(sig model.Signature, v any) (map[string]input, error) {
	names := model.Names(sig.Inputs)
	obj, isObj := v.(map[string]any)
	if !isObj {
		if len(names) != 1 {
			return nil, status.Errorf(codes.InvalidArgument, "'inputs' must be an object of named inputs {%s}", strings.Join(names, ","))
		}
		in, err := jsonInput(names[0], sig.Inputs[names[0]], v)
		if err != nil {
			return nil, err
		}
		return map[string]input{names[0]: in}, nil
	}
	inputs := map[string]input{}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ts, ok := sig.Inputs[k]
		if !ok {
			ts = model.TensorSpec{DType: "DT_FLOAT"} // unknown: predict reports it with TF's message
		}
		in, err := jsonInput(k, ts, obj[k])
		if err != nil {
			return nil, err
		}
		inputs[k] = in
	}
	return inputs, nil
}

// rowOutputs formats outputs as "predictions": per row, the bare value
// with one output, an object of named values with several.
func rowOutputs(p *prediction) []any {
	rows := p.outputs[p.names[0]].Rows()
	out := make([]any, rows)
	for r := 0; r < rows; r++ {
		if len(p.names) == 1 {
			out[r] = rowValue(p.outputs[p.names[0]], r)
			continue
		}
		obj := map[string]any{}
		for _, n := range p.names {
			obj[n] = rowValue(p.outputs[n], r)
		}
		out[r] = obj
	}
	return out
}

func rowValue(t tensor.Tensor, r int) any {
	rowShape := t.Shape[1:]
	w := t.RowLen()
	return tensor.Tensor{Shape: rowShape, Values: t.Values[r*w : (r+1)*w]}.JSON()
}
