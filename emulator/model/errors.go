package model

import "errors"

var (
	// ErrBasePath: the model base path does not exist or is not a
	// directory (TF: "Could not find base path ... for servable ...").
	ErrBasePath = errors.New("model: could not find base path")
	// ErrNoVersions: the base path holds no numeric version directory.
	ErrNoVersions = errors.New("model: no versions of servable found under base path")
	// ErrNoDescription: the version directory has no model.json.
	ErrNoDescription = errors.New("model: no model description")
	// ErrInvalid: model.json is malformed or has invalid values.
	ErrInvalid = errors.New("model: invalid model description")
)
