// Package runtimetest is the conformance suite every runtime.Runtime passes:
// one test function, Run, that drives a runtime through start, answer,
// rejection, crash, stop, restore and cancellation against a real server
// and asserts what the tuner relies on. A runtime's tests call Run with a
// Harness that says how to build it and how to look behind it (what it left
// running, how to kill its server from outside).
//
// Every wait in the suite is bounded by a generous watchdog, so a runtime
// that hangs fails the test instead of stalling it.
//
// BenchRestart is the matching benchmark: what one trial restart costs
// (stop, start, both ports answering), with its parts as metrics.
package runtimetest
