package daemon

import "time"

// Clock is the scheduler's time source. The daemon reads the time and
// waits for the next due study only through it, so that tests can drive
// the schedule with a clock of their own.
type Clock interface {
	Now() time.Time
	// TimerAt returns a timer that fires once the clock reads deadline
	// or later (at once when it already does). An absolute deadline
	// cannot be lost to a clock that moves between reading the time and
	// arming the timer.
	TimerAt(deadline time.Time) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

var _ Clock = SystemClock{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// TimerAt wraps time.NewTimer.
func (SystemClock) TimerAt(deadline time.Time) Timer {
	return sysTimer{time.NewTimer(time.Until(deadline))}
}

type sysTimer struct{ t *time.Timer }

var _ Timer = sysTimer{}

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
