package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe/tfrecord"
	"github.com/batchtune/batchtune/tfserving"
)

// InputSpec describes one model input from which requests are generated:
// its name in the signature, its dtype (float32, DT_FLOAT, int64, string,
// ...) and its shape, where -1 as the first dimension is the batch
// dimension (it takes the batch size of each request).
type InputSpec struct {
	Name  string  `json:"name" yaml:"name"`
	DType string  `json:"dtype" yaml:"dtype"`
	Shape []int64 `json:"shape" yaml:"shape"`
}

// GenerateRequest builds one PredictRequest carrying batch rows of seeded
// random values for each input (see randomTensor for the value ranges).
// The same inputs, batch and seed always give the same bytes. Problems with
// the description are reported together, each named by its field
// (inputs[1].shape[2]), wrapped in ErrBadPayload.
func GenerateRequest(inputs []InputSpec, batch int, seed uint64) (*tfserving.PredictRequest, error) {
	var ps configs.Problems
	if len(inputs) == 0 {
		ps.Add("inputs", "no inputs described")
	}
	if batch < 1 {
		ps.Add("batch", "must be >= 1, got %d", batch)
	}
	seen := map[string]bool{}
	type spec struct {
		dtype tfserving.DataType
		dims  []int64
	}
	specs := make([]spec, len(inputs))
	for i, in := range inputs {
		f := fmt.Sprintf("inputs[%d]", i)
		if in.Name == "" {
			ps.Add(f+".name", "is empty")
		} else if seen[in.Name] {
			ps.Add(f+".name", "%q given twice", in.Name)
		}
		seen[in.Name] = true
		d, err := ParseDType(in.DType)
		if err != nil {
			ps.Add(f+".dtype", "%v", err)
		}
		dims := make([]int64, len(in.Shape))
		for j, s := range in.Shape {
			switch {
			case s == -1 && j == 0:
				dims[j] = int64(max(batch, 1))
			case s == -1:
				ps.Add(fmt.Sprintf("%s.shape[%d]", f, j), "-1 is only allowed as the batch dimension (the first); give a size")
			case s < 1:
				ps.Add(fmt.Sprintf("%s.shape[%d]", f, j), "must be >= 1 (or -1 for the batch dimension), got %d", s)
			default:
				dims[j] = s
			}
		}
		if len(in.Shape) > 0 && in.Shape[0] != -1 && batch > 1 {
			ps.Add(f+".shape[0]", "batch %d asked for but the shape has no batch dimension (-1 first)", batch)
		}
		if n := numElements(dims); n > 1<<28 {
			ps.Add(f+".shape", "%d elements is too large for one request", n)
		}
		specs[i] = spec{d, dims}
	}
	if err := ps.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	req := &tfserving.PredictRequest{Inputs: map[string]*tfserving.TensorProto{}}
	for i, in := range inputs {
		t, err := randomTensor(specs[i].dtype, specs[i].dims, rng)
		if err != nil {
			return nil, fmt.Errorf("%w: inputs[%d].dtype: %w", ErrBadPayload, i, err)
		}
		req.Inputs[in.Name] = t
	}
	return req, nil
}

// ReadRequestFile reads one PredictRequest written as protobuf JSON
// (protojson: {"inputs": {"x": {"dtype": "DT_FLOAT", "tensor_shape": ...,
// "float_val": [...]}}}). Errors name the file.
func ReadRequestFile(path string) (*tfserving.PredictRequest, error) {
	b, err := configs.ReadFile(path, configs.MaxRequestBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	req := &tfserving.PredictRequest{}
	if err := protojson.Unmarshal(b, req); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadPayload, path, err)
	}
	if err := checkRequest(req); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadPayload, path, err)
	}
	return req, nil
}

// ReadWarmupFile reads the PredictRequests of a TF Serving warmup file
// (assets.extra/tf_serving_warmup_requests: TFRecord of PredictionLog).
// Checksums are verified; a bad or truncated record, or one that is not a
// predict log, is an error naming the file and the record index.
func ReadWarmupFile(path string) ([]*tfserving.PredictRequest, error) {
	f, err := configs.OpenFile(path, configs.MaxWarmupBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	defer f.Close()
	return readWarmup(path, f)
}

func readWarmup(name string, r io.Reader) ([]*tfserving.PredictRequest, error) {
	rd := tfrecord.NewReader(r)
	var out []*tfserving.PredictRequest
	for i := 0; ; i++ {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadPayload, name, err)
		}
		var log tfserving.PredictionLog
		if err := proto.Unmarshal(rec, &log); err != nil {
			return nil, fmt.Errorf("%w: %s: record %d: not a PredictionLog: %w", ErrBadPayload, name, i, err)
		}
		req := log.GetPredictLog().GetRequest()
		if req == nil {
			return nil, fmt.Errorf("%w: %s: record %d: not a predict_log (only Predict warmup records can be replayed)", ErrBadPayload, name, i)
		}
		if err := checkRequest(req); err != nil {
			return nil, fmt.Errorf("%w: %s: record %d: %w", ErrBadPayload, name, i, err)
		}
		out = append(out, req)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: no records", ErrBadPayload, name)
	}
	return out, nil
}

// WriteWarmupFile writes reqs as a TF Serving warmup file (the inverse of
// ReadWarmupFile), e.g. to ship generated payloads with a model.
func WriteWarmupFile(w io.Writer, reqs []*tfserving.PredictRequest) error {
	tw := tfrecord.NewWriter(w)
	for _, req := range reqs {
		log := &tfserving.PredictionLog{LogType: &tfserving.PredictionLog_PredictLog{
			PredictLog: &tfserving.PredictLog{Request: req},
		}}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(log)
		if err != nil {
			return err
		}
		if err := tw.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// checkRequest makes sure every input decodes to as many values as its
// shape says, so that a broken payload fails here and not as a wall of
// INVALID_ARGUMENT answers.
func checkRequest(req *tfserving.PredictRequest) error {
	if len(req.GetInputs()) == 0 {
		return errors.New("request has no inputs")
	}
	names := make([]string, 0, len(req.GetInputs()))
	for name := range req.GetInputs() {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := tensorValues(req.GetInputs()[name]); err != nil {
			return fmt.Errorf("inputs[%q]: %w", name, err)
		}
	}
	return nil
}

// InputsFromSignature returns the inputs of a signature as InputSpecs,
// sorted by name.
func InputsFromSignature(sig *tfserving.SignatureDef) []InputSpec {
	var out []InputSpec
	for name, info := range sig.GetInputs() {
		var dims []int64
		for _, d := range info.GetTensorShape().GetDim() {
			dims = append(dims, d.GetSize())
		}
		out = append(out, InputSpec{Name: name, DType: info.GetDtype().String(), Shape: dims})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DiscoverInputs asks the server for the target signature's inputs
// (GetModelMetadata with metadata_field "signature_def"), over gRPC when
// t.Addr is set and over REST (/v1/models/NAME/metadata) otherwise.
func DiscoverInputs(ctx context.Context, t Target) ([]InputSpec, error) {
	if t.Addr != "" {
		conn, err := dialControl(t.Addr)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return discoverGRPC(ctx, conn, t)
	}
	if t.RESTAddr == "" {
		return nil, fmt.Errorf("%w: target has neither addr nor rest_addr", ErrBadOptions)
	}
	return discoverREST(ctx, defaultHTTPClient(), t)
}

func discoverGRPC(ctx context.Context, conn grpc.ClientConnInterface, t Target) ([]InputSpec, error) {
	resp, err := tfserving.NewPredictionServiceClient(conn).GetModelMetadata(ctx, &tfserving.GetModelMetadataRequest{
		ModelSpec:     t.modelSpec(),
		MetadataField: []string{"signature_def"},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: GetModelMetadata %s: %w", ErrNoMetadata, t.Model, err)
	}
	anyDef, ok := resp.GetMetadata()["signature_def"]
	if !ok {
		return nil, fmt.Errorf("%w: %s: metadata has no signature_def", ErrNoMetadata, t.Model)
	}
	var defs tfserving.SignatureDefMap
	if err := anyDef.UnmarshalTo(&defs); err != nil {
		return nil, fmt.Errorf("%w: %s: signature_def: %w", ErrNoMetadata, t.Model, err)
	}
	return pickSignature(&defs, t)
}

func pickSignature(defs *tfserving.SignatureDefMap, t Target) ([]InputSpec, error) {
	sig, ok := defs.GetSignatureDef()[t.signature()]
	if !ok {
		var have []string
		for k := range defs.GetSignatureDef() {
			have = append(have, k)
		}
		sort.Strings(have)
		return nil, fmt.Errorf("%w: model %s has no signature %q (it has %q)", ErrNoMetadata, t.Model, t.signature(), have)
	}
	in := InputsFromSignature(sig)
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: signature %q of %s has no inputs", ErrNoMetadata, t.signature(), t.Model)
	}
	return in, nil
}

// restMetadata is the REST form of GetModelMetadataResponse; its
// signature_def is SignatureDefMap in protobuf JSON.
type restMetadata struct {
	Metadata struct {
		SignatureDef jsonRaw `json:"signature_def"`
	} `json:"metadata"`
}

type jsonRaw []byte

func (j *jsonRaw) UnmarshalJSON(b []byte) error { *j = bytes.Clone(b); return nil }

func discoverREST(ctx context.Context, client *http.Client, t Target) ([]InputSpec, error) {
	url := "http://" + t.RESTAddr + t.restModelPath() + "/metadata"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s: %w", ErrNoMetadata, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: %s: %s", ErrNoMetadata, url, resp.Status, truncate(string(body), 200))
	}
	var md restMetadata
	if err := json.Unmarshal(body, &md); err != nil || len(md.Metadata.SignatureDef) == 0 {
		return nil, fmt.Errorf("%w: GET %s: no metadata.signature_def in the answer", ErrNoMetadata, url)
	}
	var defs tfserving.SignatureDefMap
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(md.Metadata.SignatureDef, &defs); err != nil {
		return nil, fmt.Errorf("%w: GET %s: signature_def: %w", ErrNoMetadata, url, err)
	}
	return pickSignature(&defs, t)
}
