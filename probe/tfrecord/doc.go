// Package tfrecord reads and writes TensorFlow's TFRecord container, the
// format of a TF Serving warmup file (assets.extra/tf_serving_warmup_requests).
//
// A file is a sequence of records, each framed as
//
//	uint64  length of data, little-endian
//	uint32  masked CRC-32C of the 8 length bytes
//	[]byte  data
//	uint32  masked CRC-32C of data
//
// where mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Reader checks
// both checksums and reports a bad or truncated record with its index and
// byte offset; Writer produces the same framing. Neither interprets the data:
// callers decode it (probe decodes PredictionLog messages).
package tfrecord
