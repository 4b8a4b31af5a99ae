// Package testenv is what the runtime tests share: the small fake TF
// Serving in testdata/fakeserver built from source, the stand-in found in
// the repository, the fake's harness checks, and the BATCHTUNE_ENGINE rule
// (when it is "required", a missing engine, image or binary fails a test
// instead of skipping it). It is for tests only.
package testenv
