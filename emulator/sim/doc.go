// Package sim simulates a stand-in trial in virtual time: what the probe
// would measure if tfs-emulator ran a model with a batching config under a
// load on this machine, computed in a fraction of a second instead of
// measured in tens of seconds. It exists to record performance surfaces of
// thousands of configurations (experiments/surfaces) that would take days
// to sweep for real.
//
// It is not a formula for throughput. The scheduler is the stand-in's own
// (emulator/sched, driven by a sched.Virtual clock); the accelerator's
// device time is the stand-in's own device model (device.Accelerator's
// Reserve: its in-order queue, cost curve, jitter and cold starts); TF
// Serving's limits act as they do in the stand-in (max_enqueued_batches
// answers UNAVAILABLE, --grpc_max_threads holds requests back, a
// max_batch_size beyond device memory fails the load). What the simulation
// adds is the host CPU: every piece of CPU work is a job on a Processor,
// the machine's cores shared by processor sharing with a parallelism cap
// per job, so threads that oversubscribe the cores slow each other down
// and the load generator, running on the same machine, takes its share.
//
// Data flows like this. MeasureHost runs a model's real device code
// (emulator/device) on this machine and records, per intra-op thread count
// and batch size, the CPU time and wall time of one batch's host work (and
// the same with several executions at once, to check the processor-sharing
// model: Calibration.CheckContention). The serving costs (per request, per
// batch, the load generator's share, a wall-time delay per request) and
// the noise are fitted to real stand-in runs measured by the probe
// (experiments/surfaces/surfacetool fit). The result is a Calibration, a
// JSON file. Run takes a Trial — a model description, a batching config,
// the intra/inter-op and gRPC thread flags, a closed- or open-loop Load, a
// Calibration and a seed — and plays it out:
//
//	client  ──delay──► gRPC thread ──request CPU──► sched.Submit ─┐
//	   ▲                                   (queue full: UNAVAILABLE)
//	   │                                                          ▼
//	   └──◄── reply CPU ◄── Done ◄── batch: batch CPU, inter-op thread,
//	                                  host work (CPU model: the forward
//	                                  pass; accelerator: preprocessing,
//	                                  device time, projection)
//
// and returns a Result with the probe's definitions (QPS of successful
// answers, error rate, latency percentiles of successes from an HDR
// histogram), after a warmup that pays the cold batch sizes outside the
// figures. Repeats differ: the device's jitter, a per-trial speed factor
// and per-job noise are drawn from the seed, so a surface recorded with
// several seeds per configuration carries the run-to-run noise a tuner
// meets.
//
// MeasureCapacity finds a configuration's capacity for max_capacity
// surfaces: a closed-loop burst suggests the first rate, then package
// capacity's search (the tuner's own) runs open-loop steps, each a Run at
// one rate judged as the tuner judges a step; a step's seed depends on the
// trial's seed and the rate, so SweepCapacity, which measures a grid of
// rates to check the search, sees the same steps.
//
// Everything runs on the calling goroutine; Run never sleeps and checks
// its context as it goes. Nothing here prints or exits.
package sim
