package search

import "errors"

var (
	// ErrUnknownStrategy is returned by New for a strategy name it does not
	// know.
	ErrUnknownStrategy = errors.New("search: unknown strategy")

	// ErrBadRequest is returned by Suggest when the request itself is
	// unusable (no space, n < 1, an invalid objective).
	ErrBadRequest = errors.New("search: bad request")

	// ErrRejected is wrapped by Violations.Err: the configuration breaks a
	// hard rule and must not be run.
	ErrRejected = errors.New("search: configuration rejected")
)
