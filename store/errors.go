package store

import "errors"

var (
	// ErrInUse means another process holds the store for writing; the
	// returned error is an *InUseError that names it.
	ErrInUse = errors.New("store: in use")
	// ErrNotExist means a read-only open found no store file.
	ErrNotExist = errors.New("store: does not exist")
	// ErrReadOnly is returned by writes through a read-only DB.
	ErrReadOnly = errors.New("store: opened read-only")
	// ErrClosed is returned by calls on a closed DB.
	ErrClosed = errors.New("store: closed")
	// ErrSchemaTooNew means the file, or one record in it, was written by
	// a newer batchtune whose layout this one does not know.
	ErrSchemaTooNew = errors.New("store: written by a newer batchtune")
	// ErrCorrupt means a record does not decode or the layout is broken.
	ErrCorrupt = errors.New("store: corrupt")
	// ErrNotFound means the study, run, trial or recommendation asked for
	// is not in the store.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalid means a record handed to the store is not one it keeps
	// (an unknown state, a missing name, a finished trial rewritten).
	ErrInvalid = errors.New("store: invalid record")
)
