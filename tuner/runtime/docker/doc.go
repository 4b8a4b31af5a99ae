// Package docker is the runtime that runs each trial's TF Serving in a
// container through the Docker Engine API (the official Go client, API
// version negotiated; podman's Docker-compatible service works too).
//
// A trial container is made from a template: an image with the model
// mounted, environment, extra server arguments and ports (published on
// HostIP, or the host network), or, in existing-container mode, the
// configuration of a container the user already runs. Each Start writes the
// trial's batching.config and monitoring config into
// STATEDIR/STUDY/trial-N on the host, bind-mounts that directory read-only
// at /batchtune, appends the trial's flags to the server's arguments,
// creates and starts the container (labelled io.batchtune.study and
// io.batchtune.role=trial), and watches it with the engine's wait call;
// when it ends, its exit code, the engine's OOM flag and the tail of its log
// become the Server's Exit. Stop stops it (SIGTERM, then SIGKILL after the
// grace period) and removes it. Recover pulls the image when the pull
// policy says so (by default only when the engine lacks it). An engine that
// cannot be reached, at Recover or mid-study, is reported promptly with
// ErrEngineUnreachable rather than waited on.
//
// In existing-container mode, Production reads what the user's container
// serves with (its arguments and its batching.config), the tuner's
// baseline.
//
// Existing-container mode keeps the user's server safe. The first Start
// inspects the container and writes the engine's inspect document to
// STATEDIR/STUDY/existing-container.json (atomically, synced) before
// stopping it; trials then run in containers derived from it. Restore
// starts the user's container again, or recreates it from the snapshot when
// it is gone (one started with --rm is removed when stopped), and only then
// deletes the snapshot. A batchtune that is killed in between leaves the
// snapshot and labelled trial containers behind; the next Recover removes
// the trial containers and puts the user's container back before anything
// else.
package docker
