package replay

import "errors"

var (
	// ErrNotRecorded is returned when a configuration has no measurement
	// on the surface.
	ErrNotRecorded = errors.New("replay: configuration not recorded on the surface")

	// ErrFormat is wrapped by every problem Decode reports with a
	// surface file.
	ErrFormat = errors.New("replay: bad surface file")
)
