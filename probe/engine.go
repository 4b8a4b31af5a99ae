package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
)

// The load engine.
//
// Workers send requests and append what they saw (intended, sent and done
// times, status code) to their own shard: a slice behind a mutex that only
// the worker and, every tick, the controller ever take, so the lock is
// almost never contended and there is no channel send or goroutine switch
// per request on the recording side. The controller goroutine (the caller
// of Measure or Warmup) swaps each shard's slice for an empty one every
// tick and feeds the records to the aggregator, which it alone owns.
//
// Closed loop: Concurrency workers each send, wait, record, repeat.
//
// Open loop: one dispatcher goroutine asks the Pacer when each request is
// due, sleeps until then, and hands the intended send time to an idle
// worker over an unbuffered channel. When no worker is idle it starts a new
// one (up to Load.MaxWorkers), so a slow server cannot slow the offered
// rate; at the bound it blocks, counts the hit as delayed by the bound, and
// the intended time keeps counting, so the delay shows in the corrected
// latency. Timer wake-ups are coarse (up to ~1 ms); requests that fell due
// while the dispatcher slept are handed out at once, each with its own
// intended time, so pacing error never hides in the figures.

// tick is how often the controller collects records and re-evaluates.
const tick = 50 * time.Millisecond

// shard is one worker's record buffer and in-flight marker.
type shard struct {
	mu  sync.Mutex
	buf []record
	// spare is the controller's: the empty slice swapped in next time.
	spare []record
	// inflight is 1 + the intended send time of the request in flight,
	// 0 when the worker is idle.
	inflight atomic.Int64
	_        [64]byte // keep neighbouring shards off one cache line
}

func (s *shard) add(r record) {
	s.mu.Lock()
	s.buf = append(s.buf, r)
	s.mu.Unlock()
}

type engine struct {
	snd     sender
	nreq    int
	epoch   time.Time
	timeout time.Duration // per request; 0 for none

	// reqCtx is cancelled only by the engine, after setting cancelled, so
	// that a request it aborts is recorded as unfinished, not as an error.
	reqCtx    context.Context
	cancel    context.CancelFunc
	cancelled atomic.Bool

	stopping atomic.Bool
	stopCh   chan struct{}

	mu     sync.Mutex
	shards []*shard
	wg     sync.WaitGroup

	// open loop
	pacer      Pacer
	maxWorkers int
	ticks      chan int64
	dispatched atomic.Int64
	boundHits  atomic.Int64
	dispShard  *shard
}

func newEngine(ctx context.Context, snd sender, nreq int) *engine {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &engine{snd: snd, nreq: nreq, epoch: time.Now(), reqCtx: rctx, cancel: cancel, stopCh: make(chan struct{})}
}

func (e *engine) now() int64 { return int64(time.Since(e.epoch)) }

func (e *engine) newShard() (*shard, int) {
	s := &shard{buf: make([]record, 0, 256), spare: make([]record, 0, 256)}
	e.mu.Lock()
	id := len(e.shards)
	e.shards = append(e.shards, s)
	e.mu.Unlock()
	return s, id
}

// do sends request number *next on connection id and records it.
func (e *engine) do(s *shard, id int, next *int, intended, sent int64) {
	s.inflight.Store(intended + 1)
	var code codes.Code
	if e.timeout > 0 {
		ctx, cancel := context.WithTimeout(e.reqCtx, e.timeout)
		code = e.snd.send(ctx, id, *next)
		cancel()
	} else {
		code = e.snd.send(e.reqCtx, id, *next)
	}
	done := e.now()
	s.inflight.Store(0)
	if code == codes.Canceled && e.cancelled.Load() {
		code = codeUnfinished
	}
	if *next++; *next == e.nreq {
		*next = 0
	}
	s.add(record{intended: intended, sent: sent, done: done, code: code})
}

func (e *engine) startClosed(concurrency int) {
	for i := 0; i < concurrency; i++ {
		s, id := e.newShard()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			next := id % e.nreq
			for !e.stopping.Load() {
				t := e.now()
				e.do(s, id, &next, t, t)
			}
		}()
	}
}

func (e *engine) startOpen(p Pacer, initialWorkers, maxWorkers int) {
	e.pacer, e.maxWorkers = p, maxWorkers
	e.ticks = make(chan int64)
	e.dispShard, _ = e.newShard()
	for i := 0; i < min(initialWorkers, maxWorkers); i++ {
		e.spawn()
	}
	e.wg.Add(1)
	go e.dispatch()
}

func (e *engine) workers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dispShard != nil {
		return len(e.shards) - 1
	}
	return len(e.shards)
}

func (e *engine) spawn() {
	s, id := e.newShard()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		next := id % e.nreq
		for intended := range e.ticks {
			e.do(s, id, &next, intended, e.now())
		}
	}()
}

func (e *engine) dispatch() {
	defer e.wg.Done()
	defer close(e.ticks)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var hits uint64
	nworkers := e.workers()
	for {
		elapsed := e.now()
		wait, stop := e.pacer.Pace(time.Duration(elapsed), hits)
		if stop {
			return
		}
		intended := elapsed + int64(wait)
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-e.stopCh:
				return
			}
		}
		select {
		case e.ticks <- intended:
		case <-e.stopCh:
			return
		default:
			atBound := nworkers >= e.maxWorkers
			if atBound {
				e.boundHits.Add(1)
			} else {
				e.spawn()
				nworkers++
			}
			select {
			case e.ticks <- intended:
			case <-e.stopCh:
				if atBound {
					e.giveUp(hits)
				}
				return
			}
		}
		hits++
		e.dispatched.Store(int64(hits))
	}
}

// giveUp records the hits that were due by the stop but never sent because
// every worker was busy at the bound, as unfinished, with their time waited
// so far as a lower bound of their latency. (A hit merely not yet sent at
// the stop, by timer slack, is not the server's doing and is dropped.)
func (e *engine) giveUp(hits uint64) {
	now := e.now()
	for n := 0; n < 1<<20; n++ {
		wait, stop := e.pacer.Pace(time.Duration(now), hits)
		if stop || wait > 0 {
			return
		}
		e.dispShard.add(record{intended: now + int64(wait), sent: now, done: now, code: codeUnfinished})
		hits++
	}
}

// collect moves every shard's records into the aggregator.
func (e *engine) collect(a *aggregator) {
	e.mu.Lock()
	shards := e.shards
	e.mu.Unlock()
	for _, s := range shards {
		s.mu.Lock()
		got := s.buf
		s.buf, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		for _, r := range got {
			a.ingest(r)
		}
		s.spare = got[:0]
	}
}

// census counts busy workers and those in flight for longer than slow ns
// (by intended time), with the oldest intended time among them.
func (e *engine) census(now, slow int64) (busy, slowInFlight int) {
	e.mu.Lock()
	shards := e.shards
	e.mu.Unlock()
	for _, s := range shards {
		v := s.inflight.Load()
		if v == 0 {
			continue
		}
		busy++
		if slow > 0 && now-(v-1) > slow {
			slowInFlight++
		}
	}
	return busy, slowInFlight
}

// stop ends sending: closed-loop workers finish their request and exit,
// the dispatcher stops and closes the tick channel.
func (e *engine) stop() {
	if e.stopping.CompareAndSwap(false, true) {
		close(e.stopCh)
	}
}

// abort cancels the requests still in flight; they are recorded as
// unfinished.
func (e *engine) abort() {
	e.cancelled.Store(true)
	e.cancel()
}
