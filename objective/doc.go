// Package objective is what a study optimises: the objectives' names
// (max_throughput, min_latency), which way is better, the load each needs,
// the value a measurement gives, and how a value reads in tables. configs
// checks and documents a study's objective with it, search's strategies
// compare by it, the tuner scores trials and writes reports with it, and
// the daemon, search/replay and cmd read values with it. A new objective
// is one new entry in kinds.
package objective
