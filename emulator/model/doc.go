// Package model reads a stand-in model directory: TF Serving's layout,
// BASE/<version>/, where the stand-in's model.json takes the place of
// saved_model.pb and says what the model looks like (its signatures) and
// what it costs to run (its device model).
//
// Load finds the latest numeric version under a base path the way TF
// Serving does, decodes its model.json strictly (unknown fields are errors,
// with the line they are on), validates every field and returns all
// problems together, each named by file, line and field path. The result,
// a *Model, is what the stand-in builds its device model, signature checks
// and warmup from. Bundled models live under configs/models/.
package model
