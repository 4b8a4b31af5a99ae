package device

import "errors"

var (
	// ErrOOM: a batch needs more device memory than the device has. TF
	// reports RESOURCE_EXHAUSTED "OOM when allocating tensor ...".
	ErrOOM = errors.New("device: out of memory")
	// ErrShape: the batch does not have the model's feature count.
	ErrShape = errors.New("device: batch shape does not match the model")
	// ErrClosed: the runtime was closed.
	ErrClosed = errors.New("device: runtime closed")
)
