// Package sched is the stand-in's batch scheduler: TF Serving's shared batch
// scheduler semantics for one queue, written against two small seams so that
// the same code runs in wall-clock time inside tfs-emulator and in virtual
// time inside a discrete-event simulation.
//
// Data flows one way. A caller wraps a request in a Task and calls Submit.
// The task joins the open batch at the back of the queue (or, with large
// batch splitting, is cut into pieces that fill it and new batches). A batch
// becomes schedulable when it is full, when a newer batch has been opened
// behind it, or when its oldest task has waited Options.BatchTimeout. Each of
// Options.NumBatchThreads slots takes the oldest schedulable batch, pads it up
// to the next allowed batch size, and hands it to the Executor; when the
// executor reports the batch done, every task whose pieces are all done has
// its Done callback called, and the freed slot takes the next batch.
//
// The seams:
//
//   - Clock reads the time and arms timers. Real() is the wall clock; Virtual
//     is a clock whose time only moves when its owner runs events, for
//     simulations and deterministic tests.
//   - Executor runs a batch and reports completion through a callback, so it
//     may finish on another goroutine (the real device) or on a virtual timer
//     (a simulated cost).
//
// The scheduler never blocks on the executor, never starts goroutines of its
// own and calls executors, timers and Done callbacks without holding its
// lock, so a single-threaded event loop can drive it: callbacks may call
// Submit again.
//
// Driving it in virtual time (a discrete-event simulation of a stand-in
// trial, see Example_virtualTime):
//
//  1. clk := NewVirtual(t0).
//  2. Options from a batching config: emulator.SchedOptions(params, cores)
//     gives exactly what tfs-emulator runs with.
//  3. An Executor whose Execute computes the batch's cost and calls
//     clk.AfterFunc(cost, func() { done(nil) }). For the accelerator model
//     the device part is device.Accelerator.Reserve(clk.Now(), b.Padded)
//     (its in-order queue, jitter and cold start) or the pure
//     device.AcceleratorSpec.ExecTime; host-side work and the CPU model's
//     arithmetic come from device.Calibrate measured once per thread
//     count.
//  4. Clients as events: a closed-loop client submits a Task from an
//     AfterFunc callback and its next one from the task's Done; an
//     open-loop client schedules arrivals at their intended times. Record
//     latencies from the virtual time in Done.
//  5. clk.RunUntil(t0.Add(trialLength)); read the recorded figures.
//
// One 10-second, 64-client trial runs in about 40 ms of CPU
// (BenchmarkVirtualClosedLoop), so surfaces of thousands of configurations
// take minutes.
package sched
