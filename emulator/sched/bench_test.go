package sched

import (
	"testing"
	"time"
)

// BenchmarkVirtualClosedLoop measures how fast the scheduler runs in virtual
// time: one op is 10 virtual seconds of a 64-client closed loop against a
// launch-plus-per-row cost, the size of one simulated trial. The reported
// trials/s bounds how many configurations a simulated sweep covers per
// second of CPU.
func BenchmarkVirtualClosedLoop(b *testing.B) {
	cost := func(rows int) time.Duration { return 2*time.Millisecond + time.Duration(rows)*100*time.Microsecond }
	requests := 0
	for b.Loop() {
		clk := NewVirtual(t0)
		exec := ExecutorFunc(func(bt *Batch, done func(error)) { clk.AfterFunc(cost(bt.Padded), func() { done(nil) }) })
		s, err := New(clk, exec, Options{MaxBatchSize: 32, BatchTimeout: time.Millisecond, NumBatchThreads: 2, MaxEnqueuedBatches: 8})
		if err != nil {
			b.Fatal(err)
		}
		var client func()
		client = func() {
			t := &Task{Size: 1}
			t.Done = func(error) { requests++; client() }
			if err := s.Submit(t); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < 64; i++ {
			clk.AfterFunc(0, client)
		}
		clk.RunUntil(t0.Add(10 * time.Second))
	}
	b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "sim-requests/s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "trials/s")
}
