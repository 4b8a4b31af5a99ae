package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batchtune/batchtune/emulator"
)

// The tests in this file pin TF Serving's scheduling rules through the gRPC
// API of a running stand-in process, reading the effects back from its
// Prometheus metrics. Timing assertions are lower bounds the mechanism
// guarantees (a batch cannot close before its timeout; the device takes at
// least its modelled time) or comparisons with wide margins.

// concurrent sends n requests of rows rows at once and returns their
// latencies and errors.
func concurrent(p *proc, n, rows int) ([]time.Duration, []error) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, errs[i] = p.predict(context.Background(), rows)
			lat[i] = time.Since(start)
		}()
	}
	wg.Wait()
	return lat, errs
}

// TestSizeClose: a batch that reaches max_batch_size runs at once although
// its timeout is 30 s.
func TestSizeClose(t *testing.T) {
	base := modelDir(t, accel{launchUS: 20000}.json())
	b := tempFile(t, "batching.config", "max_batch_size { value: 4 }\nbatch_timeout_micros { value: 30000000 }\nnum_batch_threads { value: 1 }\n")
	p := launch(t, base, "--enable_batching", "--batching_parameters_file="+b)
	lat, errs := concurrent(p, 4, 1)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if lat[i] > 15*time.Second {
			t.Errorf("request %d took %v: the batch waited for its 30s timeout instead of closing on size", i, lat[i])
		}
	}
	fams := p.scrape(t)
	m := find(fams, emulator.MetricProcessedBatchSize, nil)
	if count(m) != 1 || sum(m) != 4 {
		t.Errorf("processed_batch_size: %v batches, %v rows; want one batch of 4", count(m), sum(m))
	}
}

// TestTimeoutClose: a batch that does not fill closes when its oldest task
// has waited batch_timeout_micros; a later task leaves with it.
func TestTimeoutClose(t *testing.T) {
	base := modelDir(t, accel{launchUS: 1000}.json())
	b := tempFile(t, "batching.config", "max_batch_size { value: 100 }\nbatch_timeout_micros { value: 400000 }\nnum_batch_threads { value: 1 }\n")
	p := launch(t, base, "--enable_batching", "--batching_parameters_file="+b)
	var first, second time.Duration
	var err1, err2 error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		start := time.Now()
		_, err1 = p.predict(context.Background(), 1)
		first = time.Since(start)
	}()
	time.Sleep(100 * time.Millisecond)
	go func() {
		defer wg.Done()
		start := time.Now()
		_, err2 = p.predict(context.Background(), 2)
		second = time.Since(start)
	}()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatalf("errors: %v, %v", err1, err2)
	}
	if first < 400*time.Millisecond {
		t.Errorf("first request took %v, less than the 400ms batch timeout", first)
	}
	if second >= first {
		t.Errorf("second request took %v, not less than the first's %v: the timeout runs from the oldest task", second, first)
	}
	m := find(p.scrape(t), emulator.MetricProcessedBatchSize, nil)
	if count(m) != 1 || sum(m) != 3 {
		t.Errorf("processed_batch_size: %v batches, %v rows; want one batch of 3", count(m), sum(m))
	}
}

// TestQueueFull: with max_enqueued_batches batches waiting, a request gets
// UNAVAILABLE with TF's message, and request_count counts it.
func TestQueueFull(t *testing.T) {
	base := modelDir(t, accel{launchUS: 300000}.json())
	b := tempFile(t, "batching.config", "max_batch_size { value: 1 }\nbatch_timeout_micros { value: 0 }\nmax_enqueued_batches { value: 1 }\nnum_batch_threads { value: 1 }\n")
	p := launch(t, base, "--enable_batching", "--batching_parameters_file="+b)
	_, errs := concurrent(p, 4, 1)
	ok, full := 0, 0
	for _, err := range errs {
		st := status.Convert(err)
		switch {
		case err == nil:
			ok++
		case st.Code() == codes.Unavailable && st.Message() == "The batch scheduling queue to which this task was submitted is full":
			full++
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	// One runs, at most one waits in the queue; the rest are refused.
	if full < 2 || ok < 1 || ok > 2 {
		t.Errorf("%d OK, %d queue-full; want 1-2 OK and at least 2 refused", ok, full)
	}
	fams := p.scrape(t)
	if got := find(fams, emulator.MetricRequestCount, map[string]string{"model_name": "m", "status": "UNAVAILABLE"}).GetCounter().GetValue(); got != float64(full) {
		t.Errorf("request_count{status=UNAVAILABLE} = %v, want %d", got, full)
	}
	if got := find(fams, emulator.MetricRequestCount, map[string]string{"model_name": "m", "status": "OK"}).GetCounter().GetValue(); got != float64(ok) {
		t.Errorf("request_count{status=OK} = %v, want %d", got, ok)
	}
}

// TestPadding: a batch is padded up to the next allowed batch size, visible
// in processed_batch_size and padding_size.
func TestPadding(t *testing.T) {
	base := modelDir(t, accel{launchUS: 1000}.json())
	b := tempFile(t, "batching.config", "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\nnum_batch_threads { value: 1 }\nallowed_batch_sizes: 2\nallowed_batch_sizes: 4\nallowed_batch_sizes: 8\n")
	p := launch(t, base, "--enable_batching", "--batching_parameters_file="+b)
	resp, err := p.predict(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetOutputs()["score"].GetFloatVal()); n != 3 {
		t.Errorf("answer has %d scores for 3 rows: padding leaked into the answer", n)
	}
	fams := p.scrape(t)
	if m := find(fams, emulator.MetricProcessedBatchSize, nil); count(m) != 1 || sum(m) != 4 {
		t.Errorf("processed_batch_size: %v batches, %v rows; want one batch padded to 4", count(m), sum(m))
	}
	if m := find(fams, emulator.MetricPaddingSize, map[string]string{"execution_batch_size": "4"}); count(m) != 1 || sum(m) != 1 {
		t.Errorf("padding_size{execution_batch_size=4}: %v batches, %v padding rows; want 1 and 1", count(m), sum(m))
	}
}

// TestOversized: a request larger than max_batch_size is refused with
// INVALID_ARGUMENT.
func TestOversized(t *testing.T) {
	base := modelDir(t, accel{launchUS: 1000}.json())
	b := tempFile(t, "batching.config", "max_batch_size { value: 8 }\n")
	p := launch(t, base, "--enable_batching", "--batching_parameters_file="+b)
	_, err := p.predict(context.Background(), 9)
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || st.Message() != "Task size 9 is larger than maximum input batch size 8" {
		t.Errorf("9 rows with max_batch_size 8: %v", err)
	}
	if _, err := p.predict(context.Background(), 8); err != nil {
		t.Errorf("8 rows: %v", err)
	}
}

// TestExpiredInQueue: a request whose deadline passes while it waits is not
// executed; the server counts RESOURCE_EXHAUSTED as TF's BatchingSession
// does (the client has already seen DEADLINE_EXCEEDED).
func TestExpiredInQueue(t *testing.T) {
	base := modelDir(t, accel{launchUS: 500000}.json())
	b := tempFile(t, "batching.config", "max_batch_size { value: 1 }\nbatch_timeout_micros { value: 0 }\nnum_batch_threads { value: 1 }\n")
	p := launch(t, base, "--enable_batching", "--batching_parameters_file="+b)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := p.predict(context.Background(), 1); err != nil {
			t.Errorf("first request: %v", err)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := p.predict(ctx, 1)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("queued request with a 100ms deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams := p.scrape(t)
		exhausted := find(fams, emulator.MetricRequestCount, map[string]string{"status": "RESOURCE_EXHAUSTED"}).GetCounter().GetValue()
		if exhausted == 1 {
			if m := find(fams, emulator.MetricProcessedBatchSize, nil); count(m) != 1 {
				t.Errorf("%v batches executed, want 1: the expired batch must not run", count(m))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request_count{status=RESOURCE_EXHAUSTED} = %v after 10s, want 1", exhausted)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBatchingOff: without --enable_batching each request runs alone: three
// concurrent requests take three device executions back to back.
func TestBatchingOff(t *testing.T) {
	base := modelDir(t, accel{launchUS: 200000}.json())
	p := launch(t, base)
	lat, errs := concurrent(p, 3, 1)
	slowest := time.Duration(0)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		slowest = max(slowest, lat[i])
	}
	if slowest < 600*time.Millisecond {
		t.Errorf("slowest of 3 concurrent requests took %v; alone on a 200ms device the last needs at least 600ms", slowest)
	}
	if m := find(p.scrape(t), emulator.MetricProcessedBatchSize, nil); count(m) != 0 {
		t.Errorf("batching metrics recorded with batching off: %v", m)
	}
}

// TestColdStart: the first execution of a batch size pays the cold-start
// penalty; warmup from assets.extra/tf_serving_warmup_requests removes it
// for the sizes the file holds, and only those.
func TestColdStart(t *testing.T) {
	// 10 ms warm, x100 cold: a cold execution takes at least 1 s, a warm
	// one 10 ms; 500 ms separates them with room for a loaded machine.
	desc := accel{launchUS: 10000, coldRuns: 1, coldFactor: 100}.json()
	b := tempFile(t, "batching.config", "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\nnum_batch_threads { value: 1 }\n")
	timed := func(p *proc, rows int) time.Duration {
		start := time.Now()
		if _, err := p.predict(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}

	cold := launch(t, modelDir(t, desc), "--enable_batching", "--batching_parameters_file="+b)
	if d := timed(cold, 1); d < time.Second {
		t.Errorf("without warmup, first request took %v; a cold execution takes at least 1s", d)
	}
	if d := timed(cold, 1); d > 500*time.Millisecond {
		t.Errorf("without warmup, second request of the same size took %v; warm it takes 10ms", d)
	}

	base := modelDir(t, desc)
	warmupFile(t, base, 1, 2)
	warm := launch(t, base, "--enable_batching", "--batching_parameters_file="+b) // warmup is on by default, as in TF
	if d := timed(warm, 1); d > 500*time.Millisecond {
		t.Errorf("after warmup, first request took %v; warm it takes 10ms", d)
	}
	if d := timed(warm, 3); d < time.Second {
		t.Errorf("after warmup of sizes 1 and 2, a first batch of 3 took %v; it is still cold (>= 1s)", d)
	}

	off := modelDir(t, desc)
	warmupFile(t, off, 1)
	skipped := launch(t, off, "--enable_batching", "--batching_parameters_file="+b, "--enable_model_warmup=false")
	if d := timed(skipped, 1); d < time.Second {
		t.Errorf("with --enable_model_warmup=false, first request took %v; it should be cold", d)
	}
}
