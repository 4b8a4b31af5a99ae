// Package emulator is tfs-emulator, the stand-in for TensorFlow Serving
// that every end-to-end test and experiment of batchtune runs against (no
// real TF Serving can be had on our machines). It answers like
// tensorflow_model_server and schedules like it, so that tuning it is a
// real problem.
//
// How a server comes up (Start): the configuration files are read (a
// batching.config or monitoring config that does not parse stops the start,
// as TF's CHECK does); the model version directory is loaded (model.Load),
// taking the model's load time; the batching config's load-time rules and
// the device memory are checked; the device model (emulator/device) and one
// batch scheduler per signature (emulator/sched) are built; the warmup file
// is replayed through them; failed loads are retried
// --max_num_load_retries times, --load_retry_interval_micros apart; only
// then do the gRPC and REST ports open.
//
// How a request flows: gRPC Predict or REST :predict → tensors decoded
// (emulator/tensor) and checked against the signature with TF's codes and
// messages → the inputs' rows concatenated into the model's feature rows →
// a scheduler task (or, with batching off, the device directly) → the
// batch executor merges the tasks' rows, pads them to the allowed batch
// size, records the batching metrics, runs the device model and splits the
// output rows back → the answer, with request_count and request_latency
// recorded. Metrics are served in Prometheus text format at the REST port's
// monitoring path when the monitoring config enables it, from a registry of
// the server's own.
//
// ParseArgs reads tensorflow_model_server's command line with TF's flag
// rules; cmd/tfs-emulator is the thin command around Start.
package emulator
