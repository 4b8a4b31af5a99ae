// Package search decides which configurations a study runs: the parameter
// space, the hard rules a configuration must obey before it may be run, and
// the strategies that propose the next trials.
//
// Data flows one way. A study's space section (configs.SpaceSpec) and its
// rules (the latency SLO, core and accelerator counts, user bounds, the fixed
// part of batching.config) become a *Space with NewSpace, which reports every
// problem with its field path. The tuner then calls a Strategy with a Request
// holding the space, the objective, the full trial history and a seed, and
// gets n suggestions back. Strategies hold no state between calls (katib's
// suggestion contract): a restarted daemon rebuilds everything from the
// stored history, and the same seed with the same history yields the same
// suggestions. Before running a suggestion — or any configuration from
// elsewhere, such as a production baseline — the tuner calls Space.Check,
// which names the broken rule and the reason; a configuration that breaks
// one is recorded as rejected and never run. Space.Batching and Space.Flags
// turn a Config into the batching.config message and server flags to run.
//
// Hard rules: batch_timeout_micros < SLO/3; TF Serving's own load-time
// validity rules (configs.ValidateBatching) on the batching part; the user's
// bounds. Soft knowledge (intra-op × inter-op threads far above the core
// count) only lowers the Bayesian strategy's prior weight on a
// configuration; it never hides one.
//
// Strategies: Grid (every configuration in declared order), Random (a
// scrambled Halton sequence over the discrete space), HillClimb (Model
// Analyzer's quick-search neighbourhood walk over all dimensions, with
// restarts) and Bayes (Gaussian-process regression on gonum with a
// feasibility model and constrained expected improvement). StopRule decides
// when a study has seen enough.
//
// Nothing here prints, exits or blocks without a context.
package search
