package latch

import (
	"sync"

	"github.com/batchtune/batchtune/tuner/runtime"
)

// Latch closes its channel on the first Finish and keeps that Exit.
type Latch struct {
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	exit runtime.Exit
}

// New returns an open Latch.
func New() *Latch { return &Latch{done: make(chan struct{})} }

// Finish records e and closes Done; later calls do nothing.
func (l *Latch) Finish(e runtime.Exit) {
	l.once.Do(func() {
		l.mu.Lock()
		l.exit = e
		l.mu.Unlock()
		close(l.done)
	})
}

// Done is closed by the first Finish.
func (l *Latch) Done() <-chan struct{} { return l.done }

// Exit is what the first Finish recorded, the zero Exit before.
func (l *Latch) Exit() runtime.Exit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exit
}

// Ended reports whether Finish has been called.
func (l *Latch) Ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}
