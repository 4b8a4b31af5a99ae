// Package tensor converts the tensors a TF Serving request carries into the
// dense float32 rows the stand-in's device models compute on, and back.
//
// Into the stand-in: a tensorflow.TensorProto (typed *_val fields or raw
// little-endian tensor_content, with TF's rules for short value lists) or a
// REST JSON value (nested arrays) becomes a Tensor: a shape and row-major
// float32 values, plus the dtype it was sent as so that the caller can check
// it against the signature. Out of the stand-in: a Tensor becomes a DT_FLOAT
// TensorProto (float_val, as TF Serving answers by default) or nested JSON
// arrays for the REST API.
package tensor
