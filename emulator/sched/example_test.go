package sched_test

import (
	"fmt"
	"time"

	"github.com/batchtune/batchtune/emulator/sched"
)

// Example_virtualTime drives the scheduler in virtual time, the way a
// discrete-event simulation of a stand-in would: a virtual clock, an
// executor that charges each batch a stated cost by completing it on a
// virtual timer instead of doing the work, and closed-loop clients that
// resubmit from their Done callbacks. The scheduling code is the one
// tfs-emulator runs on the wall clock.
func Example_virtualTime() {
	start := time.Unix(0, 0)
	clk := sched.NewVirtual(start)
	// A device cost curve: 2 ms launch plus 100 µs per row.
	cost := func(rows int) time.Duration { return 2*time.Millisecond + time.Duration(rows)*100*time.Microsecond }
	batches, rowsRun := 0, 0
	exec := sched.ExecutorFunc(func(b *sched.Batch, done func(error)) {
		batches++
		rowsRun += b.Size
		clk.AfterFunc(cost(b.Padded), func() { done(nil) })
	})
	s, err := sched.New(clk, exec, sched.Options{
		MaxBatchSize: 32, BatchTimeout: time.Millisecond, NumBatchThreads: 1, MaxEnqueuedBatches: 8,
	})
	if err != nil {
		panic(err)
	}
	completed := 0
	var client func()
	client = func() {
		t := &sched.Task{Size: 1}
		t.Done = func(err error) {
			completed++
			client() // closed loop: the next request as soon as one returns
		}
		if err := s.Submit(t); err != nil {
			panic(err)
		}
	}
	for i := 0; i < 16; i++ {
		clk.AfterFunc(0, client)
	}
	clk.RunUntil(start.Add(time.Second))
	// Every cycle the 16 clients' tasks wait the 1 ms timeout, then run as
	// one batch of 16 for 3.6 ms: 16 rows per 4.6 ms.
	fmt.Printf("%d requests in 1 virtual second, mean batch %.1f\n", completed, float64(rowsRun)/float64(batches))
	// Output: 3472 requests in 1 virtual second, mean batch 16.0
}
