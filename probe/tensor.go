package probe

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/batchtune/batchtune/tfserving"
)

// dtypes maps the names a user may write to TF data types: TF's enum names
// (DT_FLOAT), their lower-case short form (float) and NumPy names (float32).
var dtypes = map[string]tfserving.DataType{
	"dt_float": tfserving.DataType_DT_FLOAT, "float": tfserving.DataType_DT_FLOAT, "float32": tfserving.DataType_DT_FLOAT,
	"dt_double": tfserving.DataType_DT_DOUBLE, "double": tfserving.DataType_DT_DOUBLE, "float64": tfserving.DataType_DT_DOUBLE,
	"dt_half": tfserving.DataType_DT_HALF, "half": tfserving.DataType_DT_HALF, "float16": tfserving.DataType_DT_HALF,
	"dt_int32": tfserving.DataType_DT_INT32, "int32": tfserving.DataType_DT_INT32,
	"dt_int64": tfserving.DataType_DT_INT64, "int64": tfserving.DataType_DT_INT64,
	"dt_int16": tfserving.DataType_DT_INT16, "int16": tfserving.DataType_DT_INT16,
	"dt_int8": tfserving.DataType_DT_INT8, "int8": tfserving.DataType_DT_INT8,
	"dt_uint8": tfserving.DataType_DT_UINT8, "uint8": tfserving.DataType_DT_UINT8,
	"dt_uint16": tfserving.DataType_DT_UINT16, "uint16": tfserving.DataType_DT_UINT16,
	"dt_uint32": tfserving.DataType_DT_UINT32, "uint32": tfserving.DataType_DT_UINT32,
	"dt_uint64": tfserving.DataType_DT_UINT64, "uint64": tfserving.DataType_DT_UINT64,
	"dt_bool": tfserving.DataType_DT_BOOL, "bool": tfserving.DataType_DT_BOOL,
	"dt_string": tfserving.DataType_DT_STRING, "string": tfserving.DataType_DT_STRING, "bytes": tfserving.DataType_DT_STRING,
}

// ParseDType returns the TF data type named s (DT_FLOAT, float, float32, ...).
func ParseDType(s string) (tfserving.DataType, error) {
	if d, ok := dtypes[strings.ToLower(strings.TrimSpace(s))]; ok {
		return d, nil
	}
	names := make([]string, 0, len(dtypes))
	for k := range dtypes {
		if !strings.HasPrefix(k, "dt_") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return 0, fmt.Errorf("unknown dtype %q (want one of %s, or TF's DT_ names)", s, strings.Join(names, ", "))
}

// elemSize is the width of one element in tensor_content; 0 for strings.
func elemSize(d tfserving.DataType) int {
	switch d {
	case tfserving.DataType_DT_BOOL, tfserving.DataType_DT_INT8, tfserving.DataType_DT_UINT8:
		return 1
	case tfserving.DataType_DT_HALF, tfserving.DataType_DT_INT16, tfserving.DataType_DT_UINT16, tfserving.DataType_DT_BFLOAT16:
		return 2
	case tfserving.DataType_DT_FLOAT, tfserving.DataType_DT_INT32, tfserving.DataType_DT_UINT32:
		return 4
	case tfserving.DataType_DT_DOUBLE, tfserving.DataType_DT_INT64, tfserving.DataType_DT_UINT64, tfserving.DataType_DT_COMPLEX64:
		return 8
	}
	return 0
}

// shapeOf returns a tensor's dims; nil for a scalar.
func shapeOf(t *tfserving.TensorProto) []int64 {
	var dims []int64
	for _, d := range t.GetTensorShape().GetDim() {
		dims = append(dims, d.GetSize())
	}
	return dims
}

func numElements(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

func shapeProto(dims []int64) *tfserving.TensorShapeProto {
	s := &tfserving.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &tfserving.TensorShapeProto_Dim{Size: d})
	}
	return s
}

// randomTensor fills a tensor of the given type and concrete shape with
// values from rng: floats uniform in [0,1), integers in [0,100), bools fair,
// strings of 8 lower-case letters. Numeric tensors use tensor_content (the
// compact form TF's own clients send), strings use string_val.
func randomTensor(d tfserving.DataType, dims []int64, rng *rand.Rand) (*tfserving.TensorProto, error) {
	n := numElements(dims)
	t := &tfserving.TensorProto{Dtype: d, TensorShape: shapeProto(dims)}
	if d == tfserving.DataType_DT_STRING {
		for i := int64(0); i < n; i++ {
			s := make([]byte, 8)
			for j := range s {
				s[j] = byte('a' + rng.IntN(26))
			}
			t.StringVal = append(t.StringVal, s)
		}
		return t, nil
	}
	size := elemSize(d)
	if size == 0 {
		return nil, fmt.Errorf("dtype %s cannot be generated", d)
	}
	b := make([]byte, 0, int(n)*size)
	for i := int64(0); i < n; i++ {
		switch d {
		case tfserving.DataType_DT_FLOAT:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(rng.Float32()))
		case tfserving.DataType_DT_DOUBLE:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(rng.Float64()))
		case tfserving.DataType_DT_HALF:
			b = binary.LittleEndian.AppendUint16(b, float32ToHalf(rng.Float32()))
		case tfserving.DataType_DT_BOOL:
			b = append(b, byte(rng.IntN(2)))
		case tfserving.DataType_DT_INT8, tfserving.DataType_DT_UINT8:
			b = append(b, byte(rng.IntN(100)))
		case tfserving.DataType_DT_INT16, tfserving.DataType_DT_UINT16:
			b = binary.LittleEndian.AppendUint16(b, uint16(rng.IntN(100)))
		case tfserving.DataType_DT_INT32, tfserving.DataType_DT_UINT32:
			b = binary.LittleEndian.AppendUint32(b, uint32(rng.IntN(100)))
		case tfserving.DataType_DT_INT64, tfserving.DataType_DT_UINT64:
			b = binary.LittleEndian.AppendUint64(b, uint64(rng.IntN(100)))
		default:
			return nil, fmt.Errorf("dtype %s cannot be generated", d)
		}
	}
	t.TensorContent = b
	return t, nil
}

// float32ToHalf converts to IEEE 754 binary16, rounding toward zero; the
// random payloads only need values in [0,1).
func float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case exp <= 0:
		return sign // flush subnormals to zero
	case exp >= 31:
		return sign | 0x7c00
	}
	return sign | uint16(exp)<<10 | uint16(mant>>13)
}

func halfToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * mant / 1024 * math.Pow(2, -14)
	case 31:
		if mant == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * (1 + mant/1024) * math.Pow(2, float64(exp-15))
}

// tensorValues decodes a tensor's elements in row-major order into JSON-
// ready values (float64, int64, uint64, bool, or {"b64": ...} for strings),
// from tensor_content when it is set and from the typed *_val field
// otherwise. A *_val field holding a single value for a larger shape is
// broadcast, as TensorFlow does.
func tensorValues(t *tfserving.TensorProto) ([]any, error) {
	d := t.GetDtype()
	n := numElements(shapeOf(t))
	if c := t.GetTensorContent(); len(c) > 0 {
		size := elemSize(d)
		if size == 0 {
			return nil, fmt.Errorf("dtype %s cannot use tensor_content", d)
		}
		if int64(len(c)) != n*int64(size) {
			return nil, fmt.Errorf("tensor_content holds %d bytes, shape %v of %s needs %d", len(c), shapeOf(t), d, n*int64(size))
		}
		out := make([]any, n)
		for i := range out {
			e := c[i*size : (i+1)*size]
			switch d {
			case tfserving.DataType_DT_FLOAT:
				out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(e)))
			case tfserving.DataType_DT_DOUBLE:
				out[i] = math.Float64frombits(binary.LittleEndian.Uint64(e))
			case tfserving.DataType_DT_HALF:
				out[i] = halfToFloat64(binary.LittleEndian.Uint16(e))
			case tfserving.DataType_DT_BOOL:
				out[i] = e[0] != 0
			case tfserving.DataType_DT_INT8:
				out[i] = int64(int8(e[0]))
			case tfserving.DataType_DT_UINT8:
				out[i] = int64(e[0])
			case tfserving.DataType_DT_INT16:
				out[i] = int64(int16(binary.LittleEndian.Uint16(e)))
			case tfserving.DataType_DT_UINT16:
				out[i] = int64(binary.LittleEndian.Uint16(e))
			case tfserving.DataType_DT_INT32:
				out[i] = int64(int32(binary.LittleEndian.Uint32(e)))
			case tfserving.DataType_DT_UINT32:
				out[i] = int64(binary.LittleEndian.Uint32(e))
			case tfserving.DataType_DT_INT64:
				out[i] = int64(binary.LittleEndian.Uint64(e))
			case tfserving.DataType_DT_UINT64:
				out[i] = binary.LittleEndian.Uint64(e)
			default:
				return nil, fmt.Errorf("dtype %s is not supported", d)
			}
		}
		return out, nil
	}
	var vals []any
	switch d {
	case tfserving.DataType_DT_FLOAT:
		for _, v := range t.GetFloatVal() {
			vals = append(vals, float64(v))
		}
	case tfserving.DataType_DT_DOUBLE:
		for _, v := range t.GetDoubleVal() {
			vals = append(vals, v)
		}
	case tfserving.DataType_DT_HALF:
		for _, v := range t.GetHalfVal() {
			vals = append(vals, halfToFloat64(uint16(v)))
		}
	case tfserving.DataType_DT_INT32, tfserving.DataType_DT_INT16, tfserving.DataType_DT_INT8,
		tfserving.DataType_DT_UINT8, tfserving.DataType_DT_UINT16:
		for _, v := range t.GetIntVal() {
			vals = append(vals, int64(v))
		}
	case tfserving.DataType_DT_INT64:
		for _, v := range t.GetInt64Val() {
			vals = append(vals, v)
		}
	case tfserving.DataType_DT_UINT32:
		for _, v := range t.GetUint32Val() {
			vals = append(vals, int64(v))
		}
	case tfserving.DataType_DT_UINT64:
		for _, v := range t.GetUint64Val() {
			vals = append(vals, v)
		}
	case tfserving.DataType_DT_BOOL:
		for _, v := range t.GetBoolVal() {
			vals = append(vals, v)
		}
	case tfserving.DataType_DT_STRING:
		for _, v := range t.GetStringVal() {
			vals = append(vals, map[string]string{"b64": base64.StdEncoding.EncodeToString(v)})
		}
	default:
		return nil, fmt.Errorf("dtype %s is not supported", d)
	}
	switch {
	case int64(len(vals)) == n:
		return vals, nil
	case len(vals) == 1 && n > 1:
		return slices.Repeat(vals, int(n)), nil
	}
	return nil, fmt.Errorf("%d values for shape %v (%d elements)", len(vals), shapeOf(t), n)
}

// nest arranges flat row-major values into nested lists of shape dims.
func nest(vals []any, dims []int64) any {
	if len(dims) == 0 {
		return vals[0]
	}
	if len(dims) == 1 {
		return vals
	}
	inner := numElements(dims[1:])
	out := make([]any, dims[0])
	for i := range out {
		out[i] = nest(vals[int64(i)*inner:int64(i+1)*inner], dims[1:])
	}
	return out
}
