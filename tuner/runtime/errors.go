package runtime

import "errors"

// Sentinel errors shared by every runtime; implementations wrap them with %w
// and add the detail (the flag, the port, the container).
var (
	// ErrExited is wrapped by *ExitError: the server ended before it was
	// stopped or before it answered.
	ErrExited = errors.New("runtime: server exited")
	// ErrNotRecovered is returned by Start when Recover has not been called
	// first: leftovers of an earlier run could still hold the ports or the
	// user's container.
	ErrNotRecovered = errors.New("runtime: Start before Recover")
	// ErrBusy is returned by Recover when another live batchtune holds the
	// same study's state directory.
	ErrBusy = errors.New("runtime: study is in use by another batchtune")
	// ErrReservedFlag is returned for a server flag the runtime sets itself.
	ErrReservedFlag = errors.New("runtime: flag is set by the runtime")
	// ErrBadFlag is returned for a server flag that is not --name or --name=value.
	ErrBadFlag = errors.New("runtime: malformed server flag")
	// ErrPortInUse is returned by Start when a port fixed by the study is
	// already taken on the host.
	ErrPortInUse = errors.New("runtime: port in use")
)
