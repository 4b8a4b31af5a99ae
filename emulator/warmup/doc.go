// Package warmup reads and writes TF Serving warmup files:
// <version>/assets.extra/tf_serving_warmup_requests, a TFRecord file whose
// records are serialized tensorflow.serving.PredictionLog messages.
//
// Writing: requests → PredictionLog{predict_log{request}} → proto bytes →
// TFRecord frames (length, masked CRC-32C of the length, data, masked
// CRC-32C of the data). Reading runs the same steps backwards and checks
// both checksums. The stand-in writes the bundled models' warmup files with
// Write and replays them at load with Read when --enable_model_warmup is
// set.
package warmup
