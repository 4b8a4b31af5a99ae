// Package runtime is how batchtune (re)starts TF Serving once per trial and
// gives back what was there before. It defines the small interface the tuner
// uses, Runtime (Recover, Start, Restore) and the Server a Start returns
// (Endpoints, Done, Exit, Stop); the implementations live in the
// subpackages process (a child process of tensorflow_model_server or the
// stand-in) and docker (a container through the Docker Engine API), and
// runtimetest is the conformance suite every implementation passes.
//
// Each implementation registers its kind (the study's target.runtime) with
// Register from its init, with a Factory that maps the study's target onto
// its options; New makes the kind a target names. The tuner and the daemon
// know runtimes only through this package: a program links kinds in with
// blank imports (cmd/batchtune/runtimes.go), so a new runtime is one new
// package and one import. A runtime that tunes a user's running server in
// place implements InPlace as well, and the tuner's baseline is then what
// that server runs with (Production).
//
// Data flows one way. The tuner hands Start a Config: the trial's
// batching.config text, its parallelism flags and any further flags. The
// runtime writes the batching.config and a monitoring config (Prometheus at
// MetricsPath) into a per-trial directory, starts the server with the flags
// from Config.Args (always --enable_batching, --batching_parameters_file,
// --monitoring_config_file and --max_num_load_retries=0, so that a config the
// server rejects fails in seconds), and returns a Server whose Endpoints the
// probe measures. When the server dies on its own, Done closes and Exit
// says why (exit code, signal, the tail of its log); the tuner selects on
// Done while it measures. WaitPorts waits until both ports answer or the
// server dies.
//
// A runtime's life is Recover (once, first: it puts back whatever an earlier
// batchtune that was killed left behind, and claims the study's state
// directory), any number of Starts (each stops the previous server first),
// then Restore (stops the trial server and puts back what was there before
// the first Start). Restore must be called even when the tuner's context
// was cancelled: give it a fresh one.
//
// Nothing here prints or exits; errors wrap the sentinels in errors.go.
package runtime
