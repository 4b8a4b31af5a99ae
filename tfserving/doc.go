// Package tfserving is batchtune's own subset of TF Serving's wire protocol:
// hand-written .proto files under proto/ with the same proto packages
// (tensorflow, tensorflow.serving), service and method names and field
// numbers as TF Serving, and the Go generated from them (make proto).
//
// It covers PredictionService (Predict, GetModelMetadata), ModelService
// (GetModelStatus), TensorProto and its shape and dtype, the PredictionLog
// records of a warmup file, and the two text-format configuration files TF
// Serving reads: BatchingParameters and MonitoringConfig.
package tfserving
