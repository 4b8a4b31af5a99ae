package tensor

import (
	"encoding/json"
	"fmt"
	"math"
)

// FromJSON converts a decoded JSON value (from encoding/json with UseNumber
// or plain float64 numbers) into a tensor: a number is a scalar, a nested
// array a tensor whose shape is read from the nesting. Arrays must be
// rectangular. Booleans read as 0 and 1.
func FromJSON(v any) (Tensor, error) {
	var t Tensor
	if err := shapeOf(v, 0, &t.Shape); err != nil {
		return Tensor{}, err
	}
	t.Values = make([]float32, 0, NumElements(t.Shape))
	if err := flatten(v, 0, t.Shape, &t.Values); err != nil {
		return Tensor{}, err
	}
	return t, nil
}

// shapeOf reads the shape from the first element at each depth.
func shapeOf(v any, depth int, shape *[]int64) error {
	if depth > 32 {
		return fmt.Errorf("%w: nested deeper than 32", ErrJSON)
	}
	a, ok := v.([]any)
	if !ok {
		return nil
	}
	*shape = append(*shape, int64(len(a)))
	if len(a) == 0 {
		return nil
	}
	return shapeOf(a[0], depth+1, shape)
}

func flatten(v any, depth int, shape []int64, out *[]float32) error {
	if depth == len(shape) {
		f, err := number(v)
		if err != nil {
			return err
		}
		*out = append(*out, f)
		return nil
	}
	a, ok := v.([]any)
	if !ok || int64(len(a)) != shape[depth] {
		return fmt.Errorf("%w: ragged array: expected %d elements at depth %d (shape %s)", ErrJSON, shape[depth], depth, ShapeString(shape))
	}
	for _, e := range a {
		if err := flatten(e, depth+1, shape, out); err != nil {
			return err
		}
	}
	return nil
}

func number(v any) (float32, error) {
	switch x := v.(type) {
	case float64:
		return float32(x), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("%w: %q is not a number", ErrJSON, x.String())
		}
		return float32(f), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case map[string]any:
		if _, ok := x["b64"]; ok {
			return 0, fmt.Errorf("%w: base64 {\"b64\": ...} values are for string inputs, which the stand-in does not have", ErrJSON)
		}
	case string:
		return 0, fmt.Errorf("%w: string %q where a number is expected", ErrJSON, x)
	case []any:
		return 0, fmt.Errorf("%w: ragged array: array where a number is expected", ErrJSON)
	}
	return 0, fmt.Errorf("%w: %v where a number is expected", ErrJSON, v)
}

// JSON returns t as nested []any of float64 for encoding/json: a scalar for
// a rank-0 tensor. Non-finite values become "NaN", "Infinity" and
// "-Infinity" strings, as TF Serving's REST API writes them.
func (t Tensor) JSON() any {
	if len(t.Shape) == 0 {
		return jsonNumber(t.Values[0])
	}
	v, _ := nest(t.Values, t.Shape)
	return v
}

func nest(vals []float32, shape []int64) (any, []float32) {
	if len(shape) == 0 {
		return jsonNumber(vals[0]), vals[1:]
	}
	out := make([]any, shape[0])
	for i := range out {
		out[i], vals = nest(vals, shape[1:])
	}
	return out, vals
}

func jsonNumber(f float32) any {
	switch {
	case math.IsNaN(float64(f)):
		return "NaN"
	case math.IsInf(float64(f), 1):
		return "Infinity"
	case math.IsInf(float64(f), -1):
		return "-Infinity"
	}
	return float64(f)
}
