package probe

import "errors"

// Sentinel errors. Functions wrap them with %w and the detail (field, file,
// server message); test with errors.Is.
var (
	// ErrBadOptions: a Target, Load or option value is invalid.
	ErrBadOptions = errors.New("probe: bad options")
	// ErrBadPayload: an input description or payload file cannot make a request.
	ErrBadPayload = errors.New("probe: bad payload")
	// ErrNotReady: the model did not become AVAILABLE in time. The error is a
	// *ReadyError, which also wraps one of ErrUnreachable, ErrModelNotFound or
	// ErrModelFailed when that is the reason.
	ErrNotReady = errors.New("probe: model not ready")
	// ErrUnreachable: nothing answered at the server's address.
	ErrUnreachable = errors.New("probe: server unreachable")
	// ErrModelNotFound: the server answered that it has no such model or version.
	ErrModelNotFound = errors.New("probe: model not found")
	// ErrModelFailed: the server reports that the model failed to load.
	ErrModelFailed = errors.New("probe: model failed to load")
	// ErrRequestsFail: the server rejects every request (wrong input names,
	// dtypes or shapes, or a server that is not serving).
	ErrRequestsFail = errors.New("probe: every request failed")
	// ErrScrape: the metrics endpoint could not be read or parsed. Measure
	// reports it in the Result instead of failing.
	ErrScrape = errors.New("probe: metrics scrape failed")
	// ErrNoMetadata: the server's GetModelMetadata gave no usable signature.
	ErrNoMetadata = errors.New("probe: no usable signature in model metadata")
)
