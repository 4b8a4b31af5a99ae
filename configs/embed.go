package configs

import _ "embed"

// DemoStudyFile is where the demo study lives in the source tree; its
// relative paths (the stand-in binary, the model) are resolved against it.
const DemoStudyFile = "configs/examples/emulator-process.yaml"

// DemoStudy is the study `batchtune tune` runs when no --config is given:
// the bundled stand-in's accelerator model through the process runtime.
// Its paths are relative to DemoStudyFile, so it runs from the root of a
// source tree after make build.
//
//go:embed examples/emulator-process.yaml
var DemoStudy []byte
