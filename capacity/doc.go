// Package capacity finds the highest request rate one server sustains
// within a latency SLO, and turns that rate into the number of servers a
// target traffic needs.
//
// It is the method of seed 001 (§2.2, §3.3) made mechanical: load the
// server open loop (requests sent on a schedule, latency counted from the
// intended send time, so a server that falls behind cannot hide it), raise
// the rate until the SLO quantile or the error rate breaks or the rate can
// no longer be kept, then narrow the bracket [highest rate that met, lowest
// that broke] until it is within a stated resolution. Every step is kept:
// together they are the server's rate–latency curve, the knee included.
//
// Search knows nothing about how a step is measured: the tuner measures
// with the probe against a real server, emulator/sim in virtual time. Both
// use this one search so that the benchmark judges the procedure users run.
package capacity
