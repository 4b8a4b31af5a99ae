// Package configs holds the file formats batchtune reads and writes: TF
// Serving's batching.config (protobuf text format, decoded with the protobuf
// library's text codec, encoded by a deterministic writer so that exported
// files are stable and diffable), the study spec YAML, and the parameter
// declarations a study's search space is built from.
//
// Data flows in one direction: files are decoded into values, validated with
// every problem collected and named by its field path (Problems), and handed
// to the tuner. Nothing here prints or exits.
package configs
