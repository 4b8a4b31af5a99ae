package docker

import "errors"

// Sentinel errors of the docker runtime, wrapped with the detail. It also
// wraps the sentinels of package runtime (ErrNotRecovered, ErrBusy,
// ErrPortInUse, ErrReservedFlag).
var (
	// ErrEngineUnreachable: no container engine answered at the configured
	// address (DOCKER_HOST) within the time allowed.
	ErrEngineUnreachable = errors.New("docker: container engine not reachable")
	// ErrImageMissing: the trial image is not on the engine and the pull
	// policy forbids pulling it, or the pull failed.
	ErrImageMissing = errors.New("docker: image not found on the engine")
	// ErrContainerNotFound: the study's existing container does not exist.
	ErrContainerNotFound = errors.New("docker: container not found")
	// ErrSnapshot: the snapshot of a user's container cannot be written or
	// read back; nothing was changed when writing failed.
	ErrSnapshot = errors.New("docker: container snapshot")
	// ErrRestore: a user's container could not be put back as it was; its
	// snapshot stays in the state dir and the next Recover tries again.
	ErrRestore = errors.New("docker: restoring the user's container failed")
)
