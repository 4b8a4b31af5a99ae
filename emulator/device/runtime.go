package device

import (
	"context"
	"sync"
	"time"
)

// DefaultSpin is how long an idle intra-op worker spins looking for work
// before it sleeps, in the range of Eigen's spin loop on a modern CPU.
const DefaultSpin = 50 * time.Microsecond

// Runtime is a model's two session thread pools: the intra-op pool that
// shards one operation, and the inter-op slots that bound how many
// operations (here: batch executions) run at once.
type Runtime struct {
	Intra *Pool
	inter chan struct{}
}

// NewRuntime returns pools of intra and inter threads (each at least 1).
// spin is how long idle intra-op workers spin (0: sleep at once).
func NewRuntime(intra, inter int, spin time.Duration) *Runtime {
	return &Runtime{Intra: NewPool(max(intra, 1), spin), inter: make(chan struct{}, max(inter, 1))}
}

// InterThreads returns the number of inter-op slots.
func (r *Runtime) InterThreads() int { return cap(r.inter) }

// Inter takes an inter-op slot, waiting for one to be free, and returns
// the function that gives it back.
func (r *Runtime) Inter(ctx context.Context) (release func(), err error) {
	select {
	case r.inter <- struct{}{}:
		return func() { <-r.inter }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops the intra-op workers. Work submitted afterwards runs on the
// caller.
func (r *Runtime) Close() { r.Intra.Close() }

// Pool is an intra-op thread pool in Eigen's manner: ParallelFor cuts work
// into one shard per thread, runs one shard on the calling thread and the
// rest on workers, and waits for all of them. A worker that finds no work
// spins for the pool's spin time before sleeping, so that a next shard
// starts without a wake-up; with more threads than cores those spins take
// cores from threads that have work.
type Pool struct {
	threads int
	spin    time.Duration
	tasks   chan func()
	quit    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// NewPool starts threads-1 workers (the caller of ParallelFor is the
// remaining thread).
func NewPool(threads int, spin time.Duration) *Pool {
	p := &Pool{threads: max(threads, 1), spin: spin, tasks: make(chan func(), 1024), quit: make(chan struct{})}
	for i := 1; i < p.threads; i++ {
		p.wg.Add(1)
		go p.worker()
	}
	return p
}

// Threads returns the pool's parallelism.
func (p *Pool) Threads() int { return p.threads }

func (p *Pool) worker() {
	defer p.wg.Done()
	for {
		select {
		case f := <-p.tasks:
			f()
			p.spinFor()
		case <-p.quit:
			return
		}
	}
}

// spinFor busy-polls the task queue for p.spin, running whatever arrives.
// Deliberately no yielding: a spinning thread holds its core.
func (p *Pool) spinFor() {
	if p.spin <= 0 {
		return
	}
	deadline := time.Now().Add(p.spin)
	for i := 0; ; i++ {
		select {
		case f := <-p.tasks:
			f()
			deadline = time.Now().Add(p.spin)
			continue
		default:
		}
		if i%64 == 0 && !time.Now().Before(deadline) {
			return
		}
	}
}

// ParallelFor calls fn over [0, n) cut into at most Threads() contiguous
// shards and returns when all have run.
func (p *Pool) ParallelFor(n int, fn func(lo, hi int)) {
	shards := min(n, p.threads)
	if shards <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(shards - 1)
	for s := 1; s < shards; s++ {
		lo, hi := s*n/shards, (s+1)*n/shards
		task := func() { defer wg.Done(); fn(lo, hi) }
		select {
		case p.tasks <- task:
		case <-p.quit:
			task()
		}
	}
	fn(0, n/shards)
	wg.Wait()
}

// Close stops the workers; it is safe to call more than once.
func (p *Pool) Close() {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
}
