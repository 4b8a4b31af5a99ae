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
package sched
