package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/batchtune/batchtune/probe/tfrecord"
	"github.com/batchtune/batchtune/tfserving"
)

func TestGenerateRequest(t *testing.T) {
	in := []InputSpec{
		{Name: "features", DType: "float32", Shape: []int64{-1, 300}},
		{Name: "ids", DType: "DT_INT64", Shape: []int64{-1, 2}},
		{Name: "query", DType: "string", Shape: []int64{-1}},
		{Name: "mask", DType: "bool", Shape: []int64{-1, 3}},
		{Name: "half", DType: "float16", Shape: []int64{-1}},
	}
	r1, err := GenerateRequest(in, 8, 42)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := GenerateRequest(in, 8, 42)
	r3, _ := GenerateRequest(in, 8, 43)
	if !proto.Equal(r1, r2) {
		t.Error("same seed, different requests")
	}
	if proto.Equal(r1, r3) {
		t.Error("different seeds, same request")
	}
	f := r1.GetInputs()["features"]
	if diff := cmp.Diff([]int64{8, 300}, shapeOf(f)); diff != "" {
		t.Errorf("features shape (-want +got):\n%s", diff)
	}
	if len(f.GetTensorContent()) != 8*300*4 {
		t.Errorf("features: %d content bytes, want %d", len(f.GetTensorContent()), 8*300*4)
	}
	if n := len(r1.GetInputs()["query"].GetStringVal()); n != 8 {
		t.Errorf("query: %d strings, want 8", n)
	}
	for name, tensor := range r1.GetInputs() {
		vals, err := tensorValues(tensor)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range vals {
			if x, ok := v.(float64); ok && (x < 0 || x >= 1) {
				t.Fatalf("%s: value %g outside [0,1)", name, x)
			}
		}
	}
}

func TestGenerateRequestProblems(t *testing.T) {
	_, err := GenerateRequest([]InputSpec{
		{Name: "x", DType: "flaot", Shape: []int64{-1, 4}},
		{Name: "x", DType: "float", Shape: []int64{-1, -1}},
		{Name: "", DType: "int32", Shape: []int64{0}},
	}, 0, 1)
	if !errors.Is(err, ErrBadPayload) {
		t.Fatalf("err = %v, want ErrBadPayload", err)
	}
	// Every problem, named by its field, in one error.
	for _, want := range []string{
		`batch: must be >= 1`,
		`inputs[0].dtype: unknown dtype "flaot"`,
		`inputs[1].name: "x" given twice`,
		`inputs[1].shape[1]: -1 is only allowed as the batch dimension`,
		`inputs[2].name: is empty`,
		`inputs[2].shape[0]: must be >= 1`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// tensor_content and the typed *_val fields are two spellings of the same
// tensor; the REST body made from either is the same.
func TestTensorForms(t *testing.T) {
	shape := &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: 2}, {Size: 2}}}
	content := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape}
	for _, v := range []float32{0.5, 1.5, -2, 4} {
		content.TensorContent = appendFloat32(content.TensorContent, v)
	}
	vals := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape, FloatVal: []float32{0.5, 1.5, -2, 4}}
	b1, err := restBody(&tfserving.PredictRequest{Inputs: map[string]*tfserving.TensorProto{"x": content}}, Target{})
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := restBody(&tfserving.PredictRequest{Inputs: map[string]*tfserving.TensorProto{"x": vals}}, Target{})
	if string(b1) != string(b2) || string(b1) != `{"inputs":{"x":[[0.5,1.5],[-2,4]]}}` {
		t.Errorf("bodies differ or are wrong:\n%s\n%s", b1, b2)
	}
	// One *_val value for a larger shape is broadcast, as TF does.
	bc := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_INT64, TensorShape: shape, Int64Val: []int64{7}}
	got, err := tensorValues(bc)
	if err != nil || len(got) != 4 || got[3] != int64(7) {
		t.Errorf("broadcast: %v %v", got, err)
	}
	// A shape/content mismatch is an error, not a short tensor.
	bad := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape, TensorContent: []byte{1, 2, 3}}
	if _, err := tensorValues(bad); err == nil {
		t.Error("3 content bytes for 4 floats accepted")
	}
}

func appendFloat32(b []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
}

func TestRequestFile(t *testing.T) {
	req, _ := GenerateRequest([]InputSpec{{Name: "x", DType: "float", Shape: []int64{-1, 3}}}, 2, 1)
	req.ModelSpec = &tfserving.ModelSpec{Name: "m", SignatureName: "serving_default"}
	b, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "req.json")
	os.WriteFile(good, b, 0o644)
	got, err := ReadRequestFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(req, got, protocmp.Transform()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"inputs": {"x": {"dtype": "DT_FLOAT", "float_vals": [1]}}}`), 0o644)
	if _, err := ReadRequestFile(bad); !errors.Is(err, ErrBadPayload) || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), "float_vals") {
		t.Errorf("err = %v, want the file and the unknown field named", err)
	}
	short := filepath.Join(dir, "short.json")
	os.WriteFile(short, []byte(`{"inputs": {"x": {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": 3}]}, "float_val": [1, 2]}}}`), 0o644)
	if _, err := ReadRequestFile(short); !errors.Is(err, ErrBadPayload) || !strings.Contains(err.Error(), `inputs["x"]`) {
		t.Errorf("err = %v, want the mismatched input named", err)
	}
}

func TestWarmupFile(t *testing.T) {
	var reqs []*tfserving.PredictRequest
	for seed := uint64(0); seed < 3; seed++ {
		r, _ := GenerateRequest([]InputSpec{{Name: "x", DType: "float", Shape: []int64{-1, 4}}}, int(seed)+1, seed)
		reqs = append(reqs, r)
	}
	var buf bytes.Buffer
	if err := WriteWarmupFile(&buf, reqs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tf_serving_warmup_requests")
	os.WriteFile(path, buf.Bytes(), 0o644)
	got, err := ReadWarmupFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reqs, got, protocmp.Transform()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	good := buf.Bytes()
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-10] ^= 1 // inside the last record's data
	truncated := good[:len(good)-3]
	tests := []struct {
		name string
		data []byte
		is   error
		want string
	}{
		// A flipped bit: the CRC catches it, the error names file and record.
		{"bad crc", corrupt, tfrecord.ErrChecksum, "record 2"},
		// The file ends inside the last record's checksum.
		{"truncated", truncated, tfrecord.ErrTruncated, "record 2"},
		// An empty file holds no requests.
		{"empty", nil, ErrBadPayload, "no records"},
		// A record that is not a PredictionLog.
		{"not a log", frame(t, []byte{0xff, 0xff}), ErrBadPayload, "record 0: not a PredictionLog"},
		// A PredictionLog of another kind (field 6 absent).
		{"not predict", frame(t, nil), ErrBadPayload, "record 0: not a predict_log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			os.WriteFile(p, tt.data, 0o644)
			_, err := ReadWarmupFile(p)
			if !errors.Is(err, tt.is) || !errors.Is(err, ErrBadPayload) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %v naming %s and %q", err, tt.is, p, tt.want)
			}
		})
	}
}

func frame(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	if err := tfrecord.NewWriter(&b).Write(data); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// With no payload given, New builds one from the model's signature.
func TestDiscovery(t *testing.T) {
	f := &fakeServer{inputs: map[string]*tfserving.TensorInfo{
		"b": {Dtype: tfserving.DataType_DT_INT64, TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: -1}}}},
		"a": {Dtype: tfserving.DataType_DT_FLOAT, TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: -1}, {Size: 16}}}},
	}}
	addr := startFake(t, f)
	in, err := DiscoverInputs(context.Background(), Target{Addr: addr, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	want := []InputSpec{{Name: "a", DType: "DT_FLOAT", Shape: []int64{-1, 16}}, {Name: "b", DType: "DT_INT64", Shape: []int64{-1}}}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("inputs (-want +got):\n%s", diff)
	}
	c, err := New(context.Background(), Target{Addr: addr, Model: "m", Version: 2}, &Options{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.Requests()[0]
	if got := shapeOf(r.GetInputs()["a"]); !cmp.Equal(got, []int64{3, 16}) {
		t.Errorf("generated a with shape %v, want [3 16]", got)
	}
	if r.GetModelSpec().GetName() != "m" || r.GetModelSpec().GetVersion().GetValue() != 2 {
		t.Errorf("model spec %v", r.GetModelSpec())
	}
	// The server saw exactly that request (the raw codec sent its bytes).
	if err := c.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Measure(context.Background(), Load{Concurrency: 1}, fixed(1e9)); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, seen := range f.seen {
		if !proto.Equal(seen, r) {
			t.Errorf("request %d on the wire differs from the payload", i)
		}
	}
	if len(f.seen) < 2 {
		t.Errorf("server saw %d requests", len(f.seen))
	}

	_, err = DiscoverInputs(context.Background(), Target{Addr: addr, Model: "other"})
	if !errors.Is(err, ErrNoMetadata) || !strings.Contains(err.Error(), "Could not find") {
		t.Errorf("unknown model: err = %v", err)
	}
	_, err = DiscoverInputs(context.Background(), Target{Addr: addr, Model: "m", Signature: "classify"})
	if !errors.Is(err, ErrNoMetadata) || !strings.Contains(err.Error(), `"serving_default"`) {
		t.Errorf("unknown signature: err = %v, want the signatures it has", err)
	}
}

func TestParseDType(t *testing.T) {
	for s, want := range map[string]tfserving.DataType{"DT_FLOAT": tfserving.DataType_DT_FLOAT, "float32": tfserving.DataType_DT_FLOAT,
		"int64": tfserving.DataType_DT_INT64, "Bool": tfserving.DataType_DT_BOOL, "bytes": tfserving.DataType_DT_STRING} {
		if got, err := ParseDType(s); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseDType("complex128"); err == nil || !strings.Contains(err.Error(), "float32") {
		t.Errorf("unknown dtype error %v should list the known ones", err)
	}
}

func FuzzReadWarmup(f *testing.F) {
	var b bytes.Buffer
	r, _ := GenerateRequest([]InputSpec{{Name: "x", DType: "float", Shape: []int64{-1, 2}}}, 1, 1)
	WriteWarmupFile(&b, []*tfserving.PredictRequest{r})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := readWarmup("fuzz", bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("error %v does not wrap ErrBadPayload", err)
			}
			return
		}
		for _, r := range reqs {
			if _, err := json.Marshal(r.GetInputs()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
