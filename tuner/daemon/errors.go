package daemon

import "errors"

var (
	// ErrUnknownStudy means no loaded study has the name asked for.
	ErrUnknownStudy = errors.New("daemon: unknown study")
	// ErrAlreadyQueued means a run of the study is already waiting in the
	// queue; a second one would run the same experiment twice.
	ErrAlreadyQueued = errors.New("daemon: a run of the study is already queued")
	// ErrNothingToCancel means the run named is neither queued, running
	// nor left unfinished in the store.
	ErrNothingToCancel = errors.New("daemon: nothing to cancel")
	// ErrRunNotFound means the store has no such run of the study.
	ErrRunNotFound = errors.New("daemon: run not found")
	// ErrDraining means the daemon is shutting down and takes no new runs.
	ErrDraining = errors.New("daemon: shutting down")
	// ErrStudiesDir means the studies directory cannot be read at all (a
	// bad study file is reported per file, not with this error).
	ErrStudiesDir = errors.New("daemon: studies directory")
	// ErrTokenRequired means the API was asked to listen beyond loopback
	// without a bearer token for its mutating endpoints.
	ErrTokenRequired = errors.New("daemon: a bearer token is required to listen beyond loopback")
	// ErrBadToken means the token read from a file or the environment is
	// unusable (empty, too short, several lines).
	ErrBadToken = errors.New("daemon: bad API token")
	// ErrRunning means Run was called while the daemon already runs.
	ErrRunning = errors.New("daemon: already running")
)
