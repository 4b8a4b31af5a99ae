package probe

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
)

// runSpec is what differs between a warmup and a measurement.
type runSpec struct {
	load      Load
	phase     Phase
	bucket    time.Duration
	windowLen time.Duration
	sloNS     int64
	drain     time.Duration
	progress  func(Progress)
	// decide is asked every tick whether to stop.
	decide func(now int64, a *aggregator, slowInFlight int, windowClosed bool) (StopReason, string)
}

type runOut struct {
	e          *engine
	a          *aggregator
	reason     StopReason
	detail     string
	stopAt     int64
	peakWorker int
	cause      error
}

// run drives one load run on the calling goroutine: it starts the workers,
// collects and aggregates every tick, asks spec.decide whether to stop,
// then drains, cancels what is left and flushes the aggregate.
func (c *Client) run(ctx context.Context, spec runSpec) runOut {
	e := newEngine(ctx, c.snd, len(c.reqs))
	e.timeout = c.o.RequestTimeout
	a := newAggregator(spec.bucket, spec.load.Open(), time.Duration(spec.sloNS), spec.windowLen)
	if spec.load.Open() {
		mw := spec.load.MaxWorkers
		if mw == 0 {
			mw = DefaultMaxWorkers
		}
		e.startOpen(spec.load.pacer(), max(8, c.o.Connections), mw)
	} else {
		e.startClosed(spec.load.Concurrency)
	}
	out := runOut{e: e, a: a}
	report := func(phase Phase, now int64, inFlight int) {
		if spec.progress == nil {
			return
		}
		p := Progress{Phase: phase, Elapsed: time.Duration(now), OK: a.byCode[codes.OK], Errors: a.failed(),
			P99: usToDur(a.latency.ValueAtQuantile(99)), InFlight: inFlight}
		if n := len(a.series); n > 0 {
			p.QPS = float64(a.series[n-1].OK) / spec.bucket.Seconds()
		}
		spec.progress(p)
	}
	report(spec.phase, 0, 0)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for out.reason == "" {
		select {
		case <-ticker.C:
		case <-ctx.Done():
			out.reason, out.detail, out.cause = StopCancelled, context.Cause(ctx).Error(), context.Cause(ctx)
			continue
		}
		now := e.now()
		e.collect(a)
		busy, slowInFlight := e.census(now, spec.sloNS)
		workers := e.workers()
		out.peakWorker = max(out.peakWorker, workers)
		finalised, closed := a.advance(now, e.dispatched.Load(), busy, workers)
		if finalised {
			report(spec.phase, now, busy)
		}
		out.reason, out.detail = spec.decide(now, a, slowInFlight, closed)
	}
	out.stopAt = e.now()
	a.stopAt = out.stopAt
	e.stop()

	// Drain: let requests in flight finish (unless the caller gave up).
	report(PhaseDraining, out.stopAt, 0)
	allDone := make(chan struct{})
	go func() { e.wg.Wait(); close(allDone) }()
	drain := time.NewTimer(spec.drain)
	defer drain.Stop()
	if out.reason == StopCancelled {
		e.abort()
	}
	ctxDone := ctx.Done()
drainLoop:
	for {
		select {
		case <-allDone:
			break drainLoop
		case <-ticker.C:
			e.collect(a)
		case <-drain.C:
			e.abort()
		case <-ctxDone:
			e.abort()
			ctxDone = nil
		}
	}
	e.collect(a)
	a.flush(e.dispatched.Load())
	e.cancel()
	out.peakWorker = max(out.peakWorker, e.workers())
	return out
}

// upperHits counts the requests an open-loop schedule sends before d (0
// when there are too many to count).
func upperHits(p Pacer, d time.Duration) int64 {
	const limit = 50_000_000
	var n uint64
	for ; n < limit; n++ {
		wait, stop := p.Pace(0, n)
		if stop || wait >= d {
			return int64(n)
		}
	}
	return 0
}
