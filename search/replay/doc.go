// Package replay benchmarks search strategies on recorded performance
// surfaces instead of live servers.
//
// A surface is a file of measurements (format below) taken by sweeping a
// server over every configuration of a space, several times each, so that
// the noise a strategy will meet is real. Data flows: Load (or Decode)
// reads and checks a surface; Surface.Replay answers a configuration with
// one of its recorded measurements, drawn by seed, as the search.Trial a
// tuner would have recorded; Bench runs every strategy over many seeds
// against a surface and summarises how many trials each needed to come
// within 95% and 99% of the best truly feasible objective (truth being the
// mean over a configuration's repeats) and how often its final pick was
// truly feasible, and, when asked, runs the tuner's confirmation stage
// (package internal/confirm) on each run's history, each repeat a fresh
// restart: a draw of any of the candidate's recorded runs, its reference
// runs included (Surface.Restarts), to report what a user is handed;
// Report.WriteTable formats that summary.
//
// # Surface file format (batchtune-surface/2, reading batchtune-surface/1)
//
// Version 2 adds max_capacity surfaces (below); everything else is version
// 1 unchanged, and version 1 files are still read (and written back in
// their own format).
//
// JSON Lines, UTF-8. Line 1 is the header object:
//
//	{"format":"batchtune-surface/1", "name":"accel-ranking",
//	 "source":"how it was recorded (command, stand-in version)",
//	 "model":"ranking", "device":"accelerator",
//	 "objective":"max_throughput", "concurrency":64,
//	 "slo":"50ms", "error_budget":0.01, "cores":2, "gpus":1,
//	 "space":[{"name":"max_batch_size","values":[1,2,4,8]}, ...]}
//
// objective is max_throughput (closed loop at concurrency) or min_latency
// (open loop at "rate" requests/s; a measurement achieving at least
// (1 - rate_tolerance) of it, default 0.02, counts as achieving it). space
// lists configs.ParamSpec objects in order; it must build a search.Space
// under the header's rules (slo, cores, gpus). "fixed" (optional) maps
// server flags the sweep pinned outside the space to their values (e.g.
// {"grpc_max_threads":256}). Every later line is one
// measurement:
//
//	{"config":[8,2000,1,16,0,0], "qps":1234.5, "p99_us":18250,
//	 "error_rate":0.0, "load_failed":false, "oom":false}
//
// config gives one value per space parameter in header order (for
// allowed_batch_sizes, the choice code); qps is the achieved throughput,
// p99_us the 99th-percentile latency in microseconds, error_rate the
// fraction of requests that failed; load_failed marks a server that did not
// come up (qps, p99_us, error_rate then ignored) and oom one that failed
// because max_batch_size did not fit device memory; "reference":true marks
// an extra run taken only to pin down a contender's truth (it counts in the
// truth, the mean over every run, and is never replayed to a strategy; the
// confirmation stage's repeats draw it). Repeats of a configuration are
// separate lines. Every configuration of the space that
// passes the hard rules must be recorded at least once; lines in any order.
//
// A max_capacity surface (version 2 only) records per run the capacity:
// the highest open-loop rate at which the run's step search (package
// capacity) met the SLO quantile, the error budget and the rate; its
// header's concurrency is the closed-loop burst that suggested the first
// rate. Each line adds
//
//	"capacity":1234.5, "upper":1290.0,
//	"steps":[{"rate":1100,"qps":1099.5,"p99_us":31000,"error_rate":0,"meets":true}, ...]
//
// capacity is required unless the run failed to load (0 when no rate met
// the SLO), upper is the lowest rate that broke it (0: none did), steps
// (optional) every step measured in order; qps, p99_us and error_rate are
// the knee's, the step at the capacity. The truth of a configuration is the
// mean capacity over its runs, feasible when above 0 and no run failed to
// load; a replayed trial's Value is the drawn run's capacity, feasible when
// above 0.
package replay
