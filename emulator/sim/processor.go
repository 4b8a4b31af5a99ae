package sim

import (
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/batchtune/batchtune/emulator/sched"
)

// Processor is a machine's cores shared by the work running on them, in
// virtual time: processor sharing with a parallelism cap per job. A job is
// an amount of CPU work (core-time) and the most cores it can use at once.
// At every moment the cores are divided by water-filling: every job gets
// the same share unless its cap is lower, and what capped jobs leave goes
// to the others. The division is recomputed whenever a job starts or ends,
// so a job's duration reflects every job that overlapped it, which is how
// threads that oversubscribe the cores slow each other down.
//
// Jobs with the same cap always run at the same rate, so each cap group
// keeps one counter of the service every member has received and a heap
// of its members by the counter value at which they finish: a start or
// completion costs O(log n), not O(n).
//
// A Processor belongs to one simulation: it is driven by its Virtual
// clock's event loop and is not safe for concurrent use.
type Processor struct {
	clk    *sched.Virtual
	cores  float64
	rr     *roundRobin // non-nil: round robin instead of processor sharing
	groups []*capGroup // by cap, ascending
	n      int         // jobs running
	last   time.Time
	timer  sched.Timer
	at     time.Time // when timer fires
	busy   float64   // core-nanoseconds delivered
	free   []*job
}

// capGroup is the jobs of one cap: they share a rate and a service
// counter.
type capGroup struct {
	cap    float64
	rate   float64 // cores each member runs on now
	served float64 // core-nanoseconds each member has received since the group began
	jobs   jobHeap
}

type job struct {
	finish float64 // the group's served value at which the job is done
	done   func()
}

// NewProcessor returns cores cores driven by clk.
func NewProcessor(clk *sched.Virtual, cores float64) *Processor {
	return &Processor{clk: clk, cores: cores, last: clk.Now()}
}

// Run starts a job of work core-time that uses at most par cores (at
// least 1e-3; a cap above the core count is the core count). done is
// called from the clock's event loop when the work is done, never from
// Run itself.
func (p *Processor) Run(work time.Duration, par float64, done func()) {
	par = math.Min(math.Max(par, 1e-3), p.cores)
	if work <= 0 {
		p.clk.AfterFunc(0, done)
		return
	}
	if p.rr != nil {
		p.rr.run(work, par, done)
		return
	}
	p.advance()
	g := p.group(par)
	var j *job
	if n := len(p.free); n > 0 {
		j, p.free = p.free[n-1], p.free[:n-1]
	} else {
		j = &job{}
	}
	j.finish, j.done = g.served+float64(work), done
	heap.Push(&g.jobs, j)
	p.n++
	p.allocate()
	p.arm()
}

// group returns the group of cap c, making it if needed.
func (p *Processor) group(c float64) *capGroup {
	i, ok := slices.BinarySearchFunc(p.groups, c, func(g *capGroup, c float64) int {
		switch {
		case g.cap < c:
			return -1
		case g.cap > c:
			return 1
		}
		return 0
	})
	if !ok {
		p.groups = slices.Insert(p.groups, i, &capGroup{cap: c})
	}
	return p.groups[i]
}

// Busy returns the core-time delivered so far.
func (p *Processor) Busy() time.Duration {
	if p.rr != nil {
		return p.rr.busy
	}
	p.advance()
	return time.Duration(p.busy)
}

// Running returns the number of jobs in progress.
func (p *Processor) Running() int {
	if p.rr != nil {
		return p.rr.jobs
	}
	return p.n
}

// NewRoundRobin returns cores cores driven by clk that run work the way
// the Go runtime runs goroutines on GOMAXPROCS threads: a job of
// parallelism p is ceil(p) threads (at most the cores), threads wait in
// one first-come first-served queue, and each runs on a core until it is
// done or has run quantum, then goes to the back of the queue. Short work
// therefore runs to completion once started, unlike processor sharing,
// where every job in progress slows down as another arrives.
func NewRoundRobin(clk *sched.Virtual, cores int, quantum time.Duration) *Processor {
	p := &Processor{clk: clk, cores: float64(cores), last: clk.Now()}
	p.rr = &roundRobin{clk: clk, cores: cores, quantum: quantum}
	return p
}

// roundRobin is a Processor's state under NewRoundRobin.
type roundRobin struct {
	clk     *sched.Virtual
	cores   int
	quantum time.Duration
	ready   []*rrThread // FIFO; ready[head:] are waiting
	head    int
	running int
	jobs    int
	busy    time.Duration
}

type rrThread struct {
	left time.Duration
	job  *rrJob
}

type rrJob struct {
	threads int
	done    func()
}

// run splits work of parallelism par into threads: one carries the
// critical path (work/par, the time it takes alone on enough cores), the
// others share the rest evenly.
func (r *roundRobin) run(work time.Duration, par float64, done func()) {
	n := min(int(math.Ceil(par-1e-9)), r.cores)
	n = max(n, 1)
	j := &rrJob{threads: n, done: done}
	r.jobs++
	if n == 1 {
		r.ready = append(r.ready, &rrThread{left: work, job: j})
	} else {
		path := time.Duration(float64(work) / par)
		rest := (work - path) / time.Duration(n-1)
		r.ready = append(r.ready, &rrThread{left: path, job: j})
		for range n - 1 {
			r.ready = append(r.ready, &rrThread{left: max(rest, 1), job: j})
		}
	}
	r.dispatch()
}

// dispatch starts waiting threads on free cores.
func (r *roundRobin) dispatch() {
	for r.running < r.cores && r.head < len(r.ready) {
		t := r.ready[r.head]
		r.ready[r.head] = nil
		r.head++
		if r.head > 1024 && r.head*2 > len(r.ready) {
			r.ready = append(r.ready[:0], r.ready[r.head:]...)
			r.head = 0
		}
		slice := t.left
		if r.quantum > 0 {
			slice = min(slice, r.quantum)
		}
		r.running++
		r.busy += slice
		r.clk.AfterFunc(slice, func() {
			r.running--
			t.left -= slice
			if t.left > 0 {
				r.ready = append(r.ready, t)
				r.dispatch()
				return
			}
			t.job.threads--
			finished := t.job.threads == 0
			if finished {
				r.jobs--
			}
			r.dispatch()
			if finished {
				t.job.done()
			}
		})
	}
}

// advance credits every group with the service since the last change.
func (p *Processor) advance() {
	now := p.clk.Now()
	dt := float64(now.Sub(p.last))
	p.last = now
	if dt <= 0 {
		return
	}
	for _, g := range p.groups {
		if len(g.jobs) == 0 {
			continue
		}
		g.served += g.rate * dt
		p.busy += g.rate * dt * float64(len(g.jobs))
	}
}

// allocate divides the cores by water-filling over the cap groups: groups
// whose cap is below the fair share of what is left keep their cap, the
// rest share the remainder equally.
func (p *Processor) allocate() {
	left, n := p.cores, p.n
	level := math.Inf(1)
	for _, g := range p.groups {
		k := len(g.jobs)
		if k == 0 {
			continue
		}
		if g.cap*float64(n) <= left {
			left -= g.cap * float64(k)
			n -= k
			continue
		}
		level = left / float64(n)
		break
	}
	for _, g := range p.groups {
		g.rate = math.Min(g.cap, level)
	}
}

// arm keeps one timer pending for the next completion.
func (p *Processor) arm() {
	next := math.Inf(1)
	for _, g := range p.groups {
		if len(g.jobs) == 0 {
			continue
		}
		if d := (g.jobs[0].finish - g.served) / g.rate; d < next {
			next = d
		}
	}
	if math.IsInf(next, 1) {
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		return
	}
	at := p.last.Add(time.Duration(math.Ceil(math.Max(next, 0))))
	if p.timer != nil {
		// A pending timer that fires no later is kept: it finds nothing
		// done then and re-arms, which is cheaper than moving it each time
		// a new job slows the others down.
		if !p.at.After(at) {
			return
		}
		p.timer.Stop()
	}
	p.at = at
	p.timer = p.clk.AfterFunc(at.Sub(p.clk.Now()), p.onTimer)
}

// doneWork is the work left below which a job counts as finished (float
// rounding of rate × time).
const doneWork = 1e-3

func (p *Processor) onTimer() {
	p.timer = nil
	p.advance()
	var done []func()
	for _, g := range p.groups {
		for len(g.jobs) > 0 && g.jobs[0].finish-g.served <= doneWork {
			j := heap.Pop(&g.jobs).(*job)
			done = append(done, j.done)
			j.done = nil
			p.free = append(p.free, j)
			p.n--
		}
		if len(g.jobs) == 0 {
			g.served = 0 // keeps the counter small: no member to compare with
		}
	}
	p.allocate()
	p.arm()
	for _, f := range done {
		f()
	}
}

// jobHeap orders a group's jobs by finish.
type jobHeap []*job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].finish < h[j].finish }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(*job)) }
func (h *jobHeap) Pop() any {
	old := *h
	n := len(old)
	j := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return j
}

// gate is a counting semaphore in virtual time whose waiters are served
// in arrival order: TF's inter-op slots, gRPC's server threads.
type gate struct {
	free    int
	waiters []func()
}

func newGate(n int) *gate { return &gate{free: n} }

// acquire calls f once a slot is held: at once if one is free.
func (g *gate) acquire(f func()) {
	if g.free > 0 {
		g.free--
		f()
		return
	}
	g.waiters = append(g.waiters, f)
}

// release gives a slot back, to the oldest waiter if there is one.
func (g *gate) release() {
	if len(g.waiters) > 0 {
		f := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		f()
		return
	}
	g.free++
}
