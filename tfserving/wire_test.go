package tfserving

import (
	"bytes"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The tests here pin the wire format to the field numbers of DESIGN.md §3,
// written out by hand with protowire: if a .proto field number drifts from
// TF Serving's, these bytes stop decoding into the expected message.

func field(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return protowire.AppendTag(b, num, typ)
}

func msgField(b []byte, num protowire.Number, inner []byte) []byte {
	return protowire.AppendBytes(field(b, num, protowire.BytesType), inner)
}

func strField(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(field(b, num, protowire.BytesType), s)
}

func varintField(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(field(b, num, protowire.VarintType), v)
}

// tensorBytes is a DT_FLOAT tensor of shape [1, 3] with packed float_val.
func tensorBytes() []byte {
	var dim []byte
	dim = varintField(dim, 1, 1) // Dim.size
	var dim2 []byte
	dim2 = varintField(dim2, 1, 3)
	var shape []byte
	shape = msgField(shape, 2, dim) // TensorShapeProto.dim
	shape = msgField(shape, 2, dim2)
	var floats []byte
	for _, f := range []float32{1.5, -2, 0.25} {
		floats = protowire.AppendFixed32(floats, math.Float32bits(f))
	}
	var t []byte
	t = varintField(t, 1, 1)   // dtype = DT_FLOAT
	t = msgField(t, 2, shape)  // tensor_shape
	t = msgField(t, 5, floats) // float_val, packed
	return t
}

func tensorMsg() *TensorProto {
	return &TensorProto{
		Dtype:       DataType_DT_FLOAT,
		TensorShape: &TensorShapeProto{Dim: []*TensorShapeProto_Dim{{Size: 1}, {Size: 3}}},
		FloatVal:    []float32{1.5, -2, 0.25},
	}
}

func predictRequestBytes() []byte {
	var version []byte
	version = varintField(version, 1, 7) // Int64Value.value
	var spec []byte
	// Go's encoder writes oneof members after the plain fields; field
	// order on the wire is free, so this is the order it is pinned in.
	spec = strField(spec, 1, "ranker")          // ModelSpec.name
	spec = strField(spec, 3, "serving_default") // ModelSpec.signature_name
	spec = msgField(spec, 2, version)           // ModelSpec.version
	var entry []byte
	entry = strField(entry, 1, "features") // map key
	entry = msgField(entry, 2, tensorBytes())
	var b []byte
	b = msgField(b, 1, spec)  // PredictRequest.model_spec
	b = msgField(b, 2, entry) // PredictRequest.inputs
	b = strField(b, 3, "scores")
	return b
}

func predictRequestMsg() *PredictRequest {
	return &PredictRequest{
		ModelSpec: &ModelSpec{
			Name:          "ranker",
			VersionChoice: &ModelSpec_Version{Version: wrapperspb.Int64(7)},
			SignatureName: "serving_default",
		},
		Inputs:       map[string]*TensorProto{"features": tensorMsg()},
		OutputFilter: []string{"scores"},
	}
}

func TestWireDecode(t *testing.T) {
	var statusBytes []byte
	{
		var st []byte
		st = varintField(st, 1, 0) // StatusProto.error_code = OK
		st = strField(st, 2, "")
		var mvs []byte
		mvs = varintField(mvs, 1, 3)  // version
		mvs = varintField(mvs, 2, 30) // state = AVAILABLE
		mvs = msgField(mvs, 3, st)
		statusBytes = msgField(nil, 1, mvs)
	}
	var respBytes []byte
	{
		var entry []byte
		entry = strField(entry, 1, "scores")
		var tc []byte
		tc = varintField(tc, 1, 1)
		tc = msgField(tc, 4, []byte{0, 0, 0x80, 0x3f}) // tensor_content = float32(1)
		entry = msgField(entry, 2, tc)
		respBytes = msgField(nil, 1, entry) // PredictResponse.outputs
		respBytes = msgField(respBytes, 2, strField(nil, 1, "ranker"))
	}
	var batchingBytes []byte
	{
		w := func(v uint64) []byte { return varintField(nil, 1, v) }
		batchingBytes = msgField(batchingBytes, 1, w(32))  // max_batch_size
		batchingBytes = msgField(batchingBytes, 2, w(500)) // batch_timeout_micros
		batchingBytes = msgField(batchingBytes, 3, w(16))  // max_enqueued_batches
		batchingBytes = msgField(batchingBytes, 4, w(2))   // num_batch_threads
		batchingBytes = msgField(batchingBytes, 6, append(protowire.AppendVarint(nil, 8), protowire.AppendVarint(nil, 32)...))
		batchingBytes = varintField(batchingBytes, 7, 1)  // pad_variable_length_inputs
		batchingBytes = msgField(batchingBytes, 8, w(1))  // enable_large_batch_splitting
		batchingBytes = msgField(batchingBytes, 9, w(32)) // max_execution_batch_size
	}
	var warmupBytes []byte
	{
		warmupBytes = msgField(nil, 6, msgField(nil, 1, predictRequestBytes())) // PredictionLog.predict_log.request
	}

	tests := []struct {
		name  string
		bytes []byte
		into  proto.Message
		want  proto.Message
	}{
		// A Predict request with every ModelSpec field and a packed float tensor.
		{"predict_request", predictRequestBytes(), &PredictRequest{}, predictRequestMsg()},
		// A response carrying raw tensor_content.
		{"predict_response", respBytes, &PredictResponse{}, &PredictResponse{
			Outputs:   map[string]*TensorProto{"scores": {Dtype: DataType_DT_FLOAT, TensorContent: []byte{0, 0, 0x80, 0x3f}}},
			ModelSpec: &ModelSpec{Name: "ranker"},
		}},
		// GetModelStatus answer: version 3 AVAILABLE.
		{"model_status", statusBytes, &GetModelStatusResponse{}, &GetModelStatusResponse{
			ModelVersionStatus: []*ModelVersionStatus{{Version: 3, State: ModelVersionStatus_AVAILABLE, Status: &StatusProto{}}},
		}},
		// Every BatchingParameters field number, wrappers included.
		{"batching_parameters", batchingBytes, &BatchingParameters{}, &BatchingParameters{
			MaxBatchSize: wrapperspb.Int64(32), BatchTimeoutMicros: wrapperspb.Int64(500),
			MaxEnqueuedBatches: wrapperspb.Int64(16), NumBatchThreads: wrapperspb.Int64(2),
			AllowedBatchSizes: []int64{8, 32}, PadVariableLengthInputs: true,
			EnableLargeBatchSplitting: wrapperspb.Bool(true), MaxExecutionBatchSize: wrapperspb.Int64(32),
		}},
		// One warmup record: PredictionLog.predict_log (6) → PredictLog.request (1).
		{"prediction_log", warmupBytes, &PredictionLog{}, &PredictionLog{
			LogType: &PredictionLog_PredictLog{PredictLog: &PredictLog{Request: predictRequestMsg()}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := proto.Unmarshal(tt.bytes, tt.into); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tt.into, protocmp.Transform()); diff != "" {
				t.Errorf("decoded mismatch (-want +got):\n%s", diff)
			}
			// Nothing may land in unknown fields: that would mean a number
			// we wrote by hand is not the one the .proto declares.
			if u := tt.into.ProtoReflect().GetUnknown(); len(u) > 0 {
				t.Errorf("unknown fields left after decode: %x", u)
			}
		})
	}
}

func TestWireEncode(t *testing.T) {
	// The reverse: our message marshals to exactly the hand-built bytes
	// (deterministic marshalling orders map entries; one entry here).
	got, err := proto.MarshalOptions{Deterministic: true}.Marshal(predictRequestMsg())
	if err != nil {
		t.Fatal(err)
	}
	if want := predictRequestBytes(); !bytes.Equal(want, got) {
		t.Errorf("PredictRequest bytes:\n got %x\nwant %x", got, want)
	}
	got, err = proto.Marshal(tensorMsg())
	if err != nil {
		t.Fatal(err)
	}
	if want := tensorBytes(); !bytes.Equal(want, got) {
		t.Errorf("TensorProto bytes:\n got %x\nwant %x", got, want)
	}
}

func TestServiceNames(t *testing.T) {
	// gRPC routes by these strings; they must be TF Serving's.
	for _, tt := range []struct{ got, want string }{
		{PredictionService_Predict_FullMethodName, "/tensorflow.serving.PredictionService/Predict"},
		{PredictionService_GetModelMetadata_FullMethodName, "/tensorflow.serving.PredictionService/GetModelMetadata"},
		{ModelService_GetModelStatus_FullMethodName, "/tensorflow.serving.ModelService/GetModelStatus"},
	} {
		if tt.got != tt.want {
			t.Errorf("method name %q, want %q", tt.got, tt.want)
		}
	}
}
