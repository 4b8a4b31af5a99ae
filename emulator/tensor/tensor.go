package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/batchtune/batchtune/tfserving"
)

// Tensor is a dense tensor of float32 values in row-major order. The first
// dimension is the batch dimension wherever a batch is meant.
type Tensor struct {
	Shape  []int64
	Values []float32
}

// Rows returns the size of the first dimension (0 for a scalar).
func (t Tensor) Rows() int {
	if len(t.Shape) == 0 {
		return 0
	}
	return int(t.Shape[0])
}

// RowLen returns the number of values per row: the product of the
// dimensions after the first (1 for a vector).
func (t Tensor) RowLen() int {
	n := 1
	for _, d := range t.Shape[min(1, len(t.Shape)):] {
		n *= int(d)
	}
	return n
}

// NumElements is the product of the dimensions (1 for a scalar).
func NumElements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// ShapeString formats a shape the way TF prints one: [1,256]; -1 dims print
// as -1.
func ShapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// DTypeName is TF's lower-case name of a dtype as its errors print it
// ("float", "double", "int32").
func DTypeName(dt tfserving.DataType) string {
	switch dt {
	case tfserving.DataType_DT_FLOAT:
		return "float"
	case tfserving.DataType_DT_DOUBLE:
		return "double"
	case tfserving.DataType_DT_HALF:
		return "half"
	case tfserving.DataType_DT_BFLOAT16:
		return "bfloat16"
	case tfserving.DataType_DT_STRING:
		return "string"
	case tfserving.DataType_DT_BOOL:
		return "bool"
	case tfserving.DataType_DT_INVALID:
		return "invalid"
	}
	return strings.ToLower(strings.TrimPrefix(dt.String(), "DT_"))
}

// Supported reports whether the stand-in can compute on dt: the numeric
// types and bool, all converted to float32.
func Supported(dt tfserving.DataType) bool {
	switch dt {
	case tfserving.DataType_DT_FLOAT, tfserving.DataType_DT_DOUBLE, tfserving.DataType_DT_HALF,
		tfserving.DataType_DT_INT32, tfserving.DataType_DT_INT64, tfserving.DataType_DT_INT16,
		tfserving.DataType_DT_INT8, tfserving.DataType_DT_UINT8, tfserving.DataType_DT_UINT16,
		tfserving.DataType_DT_UINT32, tfserving.DataType_DT_UINT64, tfserving.DataType_DT_BOOL:
		return true
	}
	return false
}

// elemSize is the width of one element in tensor_content.
func elemSize(dt tfserving.DataType) int {
	switch dt {
	case tfserving.DataType_DT_DOUBLE, tfserving.DataType_DT_INT64, tfserving.DataType_DT_UINT64:
		return 8
	case tfserving.DataType_DT_FLOAT, tfserving.DataType_DT_INT32, tfserving.DataType_DT_UINT32:
		return 4
	case tfserving.DataType_DT_HALF, tfserving.DataType_DT_INT16, tfserving.DataType_DT_UINT16:
		return 2
	}
	return 1 // int8, uint8, bool
}

// FromProto decodes tp into float32 values. It follows TF's
// MakeTensorFromProto: tensor_content, when present, must hold exactly the
// shape's elements; otherwise the *_val field of tp's dtype is read, an
// empty list means zeros and a short list is padded with its last value.
func FromProto(tp *tfserving.TensorProto) (Tensor, error) {
	dt := tp.GetDtype()
	if !Supported(dt) {
		return Tensor{}, fmt.Errorf("%w: %s", ErrDType, DTypeName(dt))
	}
	if tp.GetTensorShape().GetUnknownRank() {
		return Tensor{}, fmt.Errorf("%w: unknown rank", ErrShape)
	}
	shape := make([]int64, len(tp.GetTensorShape().GetDim()))
	for i, d := range tp.GetTensorShape().GetDim() {
		if d.GetSize() < 0 {
			return Tensor{}, fmt.Errorf("%w: dimension %d is %d", ErrShape, i, d.GetSize())
		}
		shape[i] = d.GetSize()
	}
	n := NumElements(shape)
	const maxElements = 1 << 28
	if n > maxElements {
		return Tensor{}, fmt.Errorf("%w: %s has %d elements, more than the stand-in's limit %d", ErrShape, ShapeString(shape), n, maxElements)
	}
	out := Tensor{Shape: shape, Values: make([]float32, n)}
	if c := tp.GetTensorContent(); len(c) > 0 {
		size := elemSize(dt)
		if int64(len(c)) != n*int64(size) {
			return Tensor{}, fmt.Errorf("%w: tensor_content has %d bytes, shape %s of %s needs %d", ErrContent, len(c), ShapeString(shape), DTypeName(dt), n*int64(size))
		}
		for i := range out.Values {
			out.Values[i] = decodeElem(dt, c[i*size:(i+1)*size])
		}
		return out, nil
	}
	m, at := valField(tp)
	if int64(m) > n {
		return Tensor{}, fmt.Errorf("%w: %d values for shape %s (%d elements)", ErrContent, m, ShapeString(shape), n)
	}
	for i := range out.Values {
		switch {
		case m == 0:
			// zeros
		case i < m:
			out.Values[i] = at(i)
		default:
			out.Values[i] = out.Values[m-1]
		}
	}
	return out, nil
}

// valField returns the length of tp's typed value list and an accessor.
func valField(tp *tfserving.TensorProto) (int, func(int) float32) {
	switch tp.GetDtype() {
	case tfserving.DataType_DT_FLOAT:
		v := tp.GetFloatVal()
		return len(v), func(i int) float32 { return v[i] }
	case tfserving.DataType_DT_DOUBLE:
		v := tp.GetDoubleVal()
		return len(v), func(i int) float32 { return float32(v[i]) }
	case tfserving.DataType_DT_HALF:
		v := tp.GetHalfVal()
		return len(v), func(i int) float32 { return halfToFloat(uint16(v[i])) }
	case tfserving.DataType_DT_INT64:
		v := tp.GetInt64Val()
		return len(v), func(i int) float32 { return float32(v[i]) }
	case tfserving.DataType_DT_UINT32:
		v := tp.GetUint32Val()
		return len(v), func(i int) float32 { return float32(v[i]) }
	case tfserving.DataType_DT_UINT64:
		v := tp.GetUint64Val()
		return len(v), func(i int) float32 { return float32(v[i]) }
	case tfserving.DataType_DT_BOOL:
		v := tp.GetBoolVal()
		return len(v), func(i int) float32 {
			if v[i] {
				return 1
			}
			return 0
		}
	default: // int32, int16, int8, uint8, uint16 travel in int_val
		v := tp.GetIntVal()
		return len(v), func(i int) float32 { return float32(v[i]) }
	}
}

func decodeElem(dt tfserving.DataType, b []byte) float32 {
	switch dt {
	case tfserving.DataType_DT_FLOAT:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case tfserving.DataType_DT_DOUBLE:
		return float32(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case tfserving.DataType_DT_HALF:
		return halfToFloat(binary.LittleEndian.Uint16(b))
	case tfserving.DataType_DT_INT64:
		return float32(int64(binary.LittleEndian.Uint64(b)))
	case tfserving.DataType_DT_UINT64:
		return float32(binary.LittleEndian.Uint64(b))
	case tfserving.DataType_DT_INT32:
		return float32(int32(binary.LittleEndian.Uint32(b)))
	case tfserving.DataType_DT_UINT32:
		return float32(binary.LittleEndian.Uint32(b))
	case tfserving.DataType_DT_INT16:
		return float32(int16(binary.LittleEndian.Uint16(b)))
	case tfserving.DataType_DT_UINT16:
		return float32(binary.LittleEndian.Uint16(b))
	case tfserving.DataType_DT_INT8:
		return float32(int8(b[0]))
	case tfserving.DataType_DT_BOOL:
		if b[0] != 0 {
			return 1
		}
		return 0
	}
	return float32(b[0]) // uint8
}

// halfToFloat converts IEEE 754 binary16 bits to float32.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(frac) / 1024 * float32(math.Pow(2, -14))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// Proto encodes t as a DT_FLOAT TensorProto with float_val, as TF Serving
// answers Predict by default.
func (t Tensor) Proto() *tfserving.TensorProto {
	return &tfserving.TensorProto{
		Dtype:       tfserving.DataType_DT_FLOAT,
		TensorShape: shapeProto(t.Shape),
		FloatVal:    t.Values,
	}
}

// ProtoContent encodes t as a DT_FLOAT TensorProto with tensor_content.
func (t Tensor) ProtoContent() *tfserving.TensorProto {
	b := make([]byte, 4*len(t.Values))
	for i, v := range t.Values {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return &tfserving.TensorProto{
		Dtype:         tfserving.DataType_DT_FLOAT,
		TensorShape:   shapeProto(t.Shape),
		TensorContent: b,
	}
}

func shapeProto(shape []int64) *tfserving.TensorShapeProto {
	sp := &tfserving.TensorShapeProto{}
	for _, d := range shape {
		sp.Dim = append(sp.Dim, &tfserving.TensorShapeProto_Dim{Size: d})
	}
	return sp
}

// Concat stacks tensors with equal row shapes along the first dimension.
func Concat(ts []Tensor) Tensor {
	rows := 0
	n := 0
	for _, t := range ts {
		rows += t.Rows()
		n += len(t.Values)
	}
	out := Tensor{Values: make([]float32, 0, n)}
	for _, t := range ts {
		out.Values = append(out.Values, t.Values...)
	}
	if len(ts) > 0 {
		out.Shape = append([]int64{int64(rows)}, ts[0].Shape[1:]...)
	}
	return out
}

// SliceRows returns rows [lo, hi) of t, sharing its values.
func (t Tensor) SliceRows(lo, hi int) Tensor {
	rl := t.RowLen()
	shape := append([]int64{int64(hi - lo)}, t.Shape[1:]...)
	return Tensor{Shape: shape, Values: t.Values[lo*rl : hi*rl]}
}
