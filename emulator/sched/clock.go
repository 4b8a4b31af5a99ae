package sched

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is the time source of a Scheduler (and of anything else that must
// run in both wall-clock and virtual time).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f once, d from now, unless the returned Timer is
	// stopped first. f runs on a goroutine of the clock's choosing.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not happened yet and reports
	// whether it did so.
	Stop() bool
}

// Real returns the wall clock: time.Now and time.AfterFunc.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Virtual is a Clock whose time moves only when its owner runs events: a
// discrete-event simulation loop. Events scheduled for the same instant run
// in the order they were scheduled. Callbacks run on the goroutine that
// calls Step, Run or RunUntil, without the clock's lock held, so they may
// schedule further events. Safe for concurrent use, but a simulation is
// normally driven from one goroutine.
type Virtual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	events eventHeap
}

var _ Clock = (*Virtual)(nil)

// NewVirtual returns a virtual clock reading start.
func NewVirtual(start time.Time) *Virtual { return &Virtual{now: start} }

// Now returns the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// AfterFunc schedules f at Now()+d (at Now() for d <= 0). It never calls f
// itself: f runs from a later Step.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	if d < 0 {
		d = 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	e := &event{at: v.now.Add(d), seq: v.seq, f: f, clock: v}
	heap.Push(&v.events, e)
	return e
}

// Pending returns the number of events not yet run or stopped.
func (v *Virtual) Pending() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.events)
}

// Next returns the time of the earliest pending event.
func (v *Virtual) Next() (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.events) == 0 {
		return time.Time{}, false
	}
	return v.events[0].at, true
}

// Step advances the clock to the earliest pending event and runs it. It
// returns false when no event is pending.
func (v *Virtual) Step() bool {
	v.mu.Lock()
	if len(v.events) == 0 {
		v.mu.Unlock()
		return false
	}
	e := heap.Pop(&v.events).(*event)
	e.index = -1
	if e.at.After(v.now) {
		v.now = e.at
	}
	v.mu.Unlock()
	e.f()
	return true
}

// RunUntil runs every event due at or before t, in time order, then sets the
// clock to t (if it is not already later).
func (v *Virtual) RunUntil(t time.Time) {
	for {
		next, ok := v.Next()
		if !ok || next.After(t) {
			break
		}
		v.Step()
	}
	v.mu.Lock()
	if t.After(v.now) {
		v.now = t
	}
	v.mu.Unlock()
}

// Advance is RunUntil(Now()+d).
func (v *Virtual) Advance(d time.Duration) { v.RunUntil(v.Now().Add(d)) }

// Run runs events until none is pending or limit events have run (limit <= 0:
// no limit) and returns how many ran. A simulation whose callbacks keep
// scheduling work forever needs the limit or RunUntil.
func (v *Virtual) Run(limit int) int {
	n := 0
	for (limit <= 0 || n < limit) && v.Step() {
		n++
	}
	return n
}

type event struct {
	at    time.Time
	seq   uint64
	f     func()
	index int
	clock *Virtual
}

func (e *event) Stop() bool {
	v := e.clock
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.index < 0 {
		return false
	}
	heap.Remove(&v.events, e.index)
	e.index = -1
	return true
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *eventHeap) Push(x any) {
	e := x.(*event)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *eventHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}
