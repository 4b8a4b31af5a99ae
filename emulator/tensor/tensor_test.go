package tensor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/tfserving"
)

func shape(dims ...int64) *tfserving.TensorShapeProto { return shapeProto(dims) }

func le32(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func TestFromProto(t *testing.T) {
	tests := []struct {
		name string
		in   *tfserving.TensorProto
		want Tensor
		err  error
	}{
		{
			// The common case: float_val with its shape.
			name: "float_val",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(2, 2), FloatVal: []float32{1, 2, 3, 4}},
			want: Tensor{Shape: []int64{2, 2}, Values: []float32{1, 2, 3, 4}},
		},
		{
			// Raw little-endian bytes, as numpy-based clients send.
			name: "tensor_content float",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(1, 3), TensorContent: le32(1.5, -2, 3)},
			want: Tensor{Shape: []int64{1, 3}, Values: []float32{1.5, -2, 3}},
		},
		{
			// int64 content is converted to float32.
			name: "tensor_content int64",
			in: &tfserving.TensorProto{Dtype: tfserving.DataType_DT_INT64, TensorShape: shape(2),
				TensorContent: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 7), uint64(0xffffffffffffffff))},
			want: Tensor{Shape: []int64{2}, Values: []float32{7, -1}},
		},
		{
			// Doubles narrow to float32.
			name: "double_val",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_DOUBLE, TensorShape: shape(2), DoubleVal: []float64{0.5, 2}},
			want: Tensor{Shape: []int64{2}, Values: []float32{0.5, 2}},
		},
		{
			// half_val carries binary16 bits: 0x3c00 = 1, 0xc000 = -2, 0x3555 ≈ 1/3.
			name: "half_val",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_HALF, TensorShape: shape(3), HalfVal: []int32{0x3c00, 0xc000, 0x3555}},
			want: Tensor{Shape: []int64{3}, Values: []float32{1, -2, 0.333251953125}},
		},
		{
			// int32 travels in int_val.
			name: "int_val",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_INT32, TensorShape: shape(2), IntVal: []int32{-3, 4}},
			want: Tensor{Shape: []int64{2}, Values: []float32{-3, 4}},
		},
		{
			// bools read as 0 and 1.
			name: "bool_val",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_BOOL, TensorShape: shape(2), BoolVal: []bool{true, false}},
			want: Tensor{Shape: []int64{2}, Values: []float32{1, 0}},
		},
		{
			// TF pads a short value list with its last value.
			name: "short list padded with last value",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(4), FloatVal: []float32{1, 2}},
			want: Tensor{Shape: []int64{4}, Values: []float32{1, 2, 2, 2}},
		},
		{
			// TF fills an empty value list with zeros.
			name: "empty list is zeros",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(1, 2)},
			want: Tensor{Shape: []int64{1, 2}, Values: []float32{0, 0}},
		},
		{
			// A value list in another type's field is ignored, as in TF.
			name: "wrong field ignored",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(2), IntVal: []int32{5, 6}},
			want: Tensor{Shape: []int64{2}, Values: []float32{0, 0}},
		},
		{
			// More values than the shape holds.
			name: "too many values",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(1), FloatVal: []float32{1, 2}},
			err:  ErrContent,
		},
		{
			// tensor_content must match the shape exactly.
			name: "content size mismatch",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(2), TensorContent: le32(1)},
			err:  ErrContent,
		},
		{
			// unknown_rank cannot be fed.
			name: "unknown rank",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: &tfserving.TensorShapeProto{UnknownRank: true}},
			err:  ErrShape,
		},
		{
			// -1 is for signatures, not values.
			name: "negative dim",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(-1, 2)},
			err:  ErrShape,
		},
		{
			// Strings have no numeric meaning for the stand-in's models.
			name: "string dtype",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_STRING, TensorShape: shape(1), StringVal: [][]byte{[]byte("x")}},
			err:  ErrDType,
		},
		{
			// A huge declared shape is refused before allocating.
			name: "huge shape",
			in:   &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape(1<<20, 1<<20)},
			err:  ErrShape,
		},
	}
	for _, tt := range tests {
		got, err := FromProto(tt.in)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		if tt.err == nil {
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: (-want +got)\n%s", tt.name, diff)
			}
		}
	}
}

// TestProtoRoundTrip: both encodings decode back to the tensor.
func TestProtoRoundTrip(t *testing.T) {
	in := Tensor{Shape: []int64{2, 3}, Values: []float32{1, -2, 3.5, 0, 1e-8, 1e8}}
	for name, tp := range map[string]*tfserving.TensorProto{"float_val": in.Proto(), "tensor_content": in.ProtoContent()} {
		got, err := FromProto(tp)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(in, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", name, diff)
		}
	}
}

func TestConcatSlice(t *testing.T) {
	a := Tensor{Shape: []int64{1, 2}, Values: []float32{1, 2}}
	b := Tensor{Shape: []int64{2, 2}, Values: []float32{3, 4, 5, 6}}
	c := Concat([]Tensor{a, b})
	if diff := cmp.Diff(Tensor{Shape: []int64{3, 2}, Values: []float32{1, 2, 3, 4, 5, 6}}, c); diff != "" {
		t.Errorf("Concat (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(b, c.SliceRows(1, 3)); diff != "" {
		t.Errorf("SliceRows (-want +got)\n%s", diff)
	}
}

func TestFromJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Tensor
		err  error
	}{
		{"scalar", `2.5`, Tensor{Shape: nil, Values: []float32{2.5}}, nil},                               // rank 0
		{"vector", `[1, 2, 3]`, Tensor{Shape: []int64{3}, Values: []float32{1, 2, 3}}, nil},              // rank 1
		{"matrix", `[[1, 2], [3, 4]]`, Tensor{Shape: []int64{2, 2}, Values: []float32{1, 2, 3, 4}}, nil}, // rank 2
		{"bools", `[true, false]`, Tensor{Shape: []int64{2}, Values: []float32{1, 0}}, nil},              // TF accepts bools
		{"empty", `[]`, Tensor{Shape: []int64{0}, Values: []float32{}}, nil},                             // zero rows
		{"ragged", `[[1, 2], [3]]`, Tensor{}, ErrJSON},                                                   // not rectangular
		{"deeper later", `[[1, 2], [3, [4]]]`, Tensor{}, ErrJSON},                                        // array where a number belongs
		{"string", `["a"]`, Tensor{}, ErrJSON},                                                           // no string inputs
		{"b64", `[{"b64": "AA=="}]`, Tensor{}, ErrJSON},                                                  // binary strings
		{"null", `[null]`, Tensor{}, ErrJSON},                                                            // not a number
	}
	for _, tt := range tests {
		var v any
		if err := json.Unmarshal([]byte(tt.in), &v); err != nil {
			t.Fatal(err)
		}
		got, err := FromJSON(v)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		if tt.err == nil {
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: (-want +got)\n%s", tt.name, diff)
			}
		}
	}
}

func TestJSONOut(t *testing.T) {
	in := Tensor{Shape: []int64{2, 2}, Values: []float32{1, float32(math.NaN()), float32(math.Inf(1)), -0.5}}
	b, err := json.Marshal(in.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `[[1,"NaN"],["Infinity",-0.5]]`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}

// FuzzFromJSON: no JSON value makes FromJSON panic, and every accepted
// value survives JSON() → FromJSON unchanged.
func FuzzFromJSON(f *testing.F) {
	for _, s := range []string{`1`, `[1,2]`, `[[1],[2]]`, `[[1,2],[3]]`, `[]`, `[[]]`, `{"a":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var v any
		if json.Unmarshal(in, &v) != nil {
			return
		}
		got, err := FromJSON(v)
		if err != nil {
			return
		}
		for _, x := range got.Values {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return // JSON numbers overflowing float32: not round-trippable as numbers
			}
		}
		back, err := FromJSON(got.JSON())
		if err != nil {
			t.Fatalf("re-read of %s: %v", in, err)
		}
		if diff := cmp.Diff(got, back); diff != "" {
			t.Fatalf("round trip (-first +second)\n%s", diff)
		}
	})
}
