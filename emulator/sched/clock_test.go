package sched

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestVirtualOrderAndStop(t *testing.T) {
	clk := NewVirtual(t0)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+clk.Now().Sub(t0).String()) }
	}
	clk.AfterFunc(ms(2), at("b"))
	clk.AfterFunc(ms(1), at("a"))
	clk.AfterFunc(ms(2), at("c")) // same instant as b: runs after b
	stopped := clk.AfterFunc(ms(1), at("never"))
	clk.AfterFunc(-ms(1), at("now")) // negative: now
	if !stopped.Stop() {
		t.Error("Stop of a pending event = false")
	}
	if stopped.Stop() {
		t.Error("second Stop = true")
	}
	// An event scheduled by a callback runs in the same Run.
	clk.AfterFunc(ms(3), func() { clk.AfterFunc(ms(1), at("chained")) })
	if n := clk.Run(0); n != 6 { // five callbacks and the one that chains
		t.Errorf("Run ran %d events, want 6", n)
	}
	want := []string{"now@0s", "a@1ms", "b@2ms", "c@2ms", "chained@4ms"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestVirtualRunUntil(t *testing.T) {
	clk := NewVirtual(t0)
	fired := 0
	clk.AfterFunc(ms(5), func() { fired++ })
	clk.AfterFunc(ms(15), func() { fired++ })
	clk.Advance(ms(10))
	if fired != 1 || clk.Now() != t0.Add(ms(10)) || clk.Pending() != 1 {
		t.Errorf("after Advance(10ms): fired %d, now %v, pending %d; want 1, +10ms, 1", fired, clk.Now().Sub(t0), clk.Pending())
	}
	if next, ok := clk.Next(); !ok || next != t0.Add(ms(15)) {
		t.Errorf("Next = %v %v, want +15ms", next.Sub(t0), ok)
	}
	var _ Timer = clk.AfterFunc(time.Hour, func() {})
}
