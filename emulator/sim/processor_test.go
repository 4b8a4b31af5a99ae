package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/emulator/sched"
)

var t0 = time.Unix(0, 0)

// TestProcessorSharing checks completion times against processor sharing
// worked out by hand on two cores.
func TestProcessorSharing(t *testing.T) {
	type job struct {
		at   time.Duration // when it is started
		work time.Duration
		par  float64
	}
	ms := time.Millisecond
	tests := []struct {
		name string
		jobs []job
		want []time.Duration // completion time of each job
	}{
		// One single-threaded job runs at one core.
		{"alone", []job{{0, 10 * ms, 1}}, []time.Duration{10 * ms}},
		// A job that may use both cores finishes in half its work.
		{"parallel", []job{{0, 10 * ms, 2}}, []time.Duration{5 * ms}},
		// A cap above the core count is the core count.
		{"cap above cores", []job{{0, 10 * ms, 8}}, []time.Duration{5 * ms}},
		// Two single-threaded jobs fit the two cores: no slowdown.
		{"two fit", []job{{0, 10 * ms, 1}, {0, 10 * ms, 1}}, []time.Duration{10 * ms, 10 * ms}},
		// Four single-threaded jobs share two cores: half speed each.
		{"four share", []job{{0, 10 * ms, 1}, {0, 10 * ms, 1}, {0, 10 * ms, 1}, {0, 10 * ms, 1}},
			[]time.Duration{20 * ms, 20 * ms, 20 * ms, 20 * ms}},
		// Water-filling: a 0.5-core job keeps its 0.5, the other two share
		// 1.5 cores (0.75 each). The 3 ms job ends at 4 ms; then the 2-core
		// cap job (9 ms - 3 ms done) gets 1.5 cores... see below.
		{"water-filling", []job{{0, 1 * ms, 0.5}, {0, 3 * ms, 1}, {0, 9 * ms, 2}},
			// 0..2ms: rates 0.5, 0.75, 0.75: job 0 done at 2ms (1ms work);
			// job 1 has 1.5ms left, job 2 has 7.5ms left; now rates 1, 1:
			// job 1 done at 3.5ms; job 2 has 6ms left at 2 cores: 6.5ms.
			[]time.Duration{2 * ms, 3500 * time.Microsecond, 6500 * time.Microsecond}},
		// A job arriving later slows the first only while they overlap.
		{"late arrival", []job{{0, 10 * ms, 2}, {2 * ms, 2 * ms, 1}},
			// 0..2: job 0 at 2 cores, 4ms done (6 left). 2..4: 1 core each:
			// job 1 done at 4ms, job 0 has 4 left at 2 cores: 6ms.
			[]time.Duration{6 * ms, 4 * ms}},
		// Zero work completes at once.
		{"zero work", []job{{3 * ms, 0, 1}}, []time.Duration{3 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := sched.NewVirtual(t0)
			p := NewProcessor(clk, 2)
			got := make([]time.Duration, len(tt.jobs))
			for i, j := range tt.jobs {
				clk.AfterFunc(j.at, func() {
					p.Run(j.work, j.par, func() { got[i] = clk.Now().Sub(t0) })
				})
			}
			clk.Run(0)
			// Completion times are rounded up to the nanosecond.
			for i := range got {
				got[i] = got[i].Round(time.Microsecond)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("completion times (-want +got):\n%s", diff)
			}
			if p.Running() != 0 {
				t.Errorf("%d jobs still running", p.Running())
			}
		})
	}
}

// TestProcessorConservesWork checks that the core-time delivered equals
// the work asked for, and never exceeds the cores, under a churn of jobs.
func TestProcessorConservesWork(t *testing.T) {
	clk := sched.NewVirtual(t0)
	p := NewProcessor(clk, 2)
	var asked time.Duration
	done := 0
	for i := range 200 {
		work := time.Duration(50+i*37%400) * time.Microsecond
		par := []float64{1, 2, 0.5, 4}[i%4]
		asked += work
		clk.AfterFunc(time.Duration(i*91%5000)*time.Microsecond, func() {
			p.Run(work, par, func() { done++ })
		})
	}
	clk.Run(0)
	if done != 200 {
		t.Fatalf("%d of 200 jobs completed", done)
	}
	busy := p.Busy()
	if d := busy - asked; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("delivered %v core-time for %v of work", busy, asked)
	}
	if elapsed := clk.Now().Sub(t0); float64(busy) > 2*float64(elapsed)+1 {
		t.Errorf("delivered %v core-time in %v on 2 cores", busy, elapsed)
	}
}

// TestGateOrder checks that a gate admits at most its size and serves
// waiters in arrival order.
func TestGateOrder(t *testing.T) {
	g := newGate(2)
	var order []int
	held := 0
	for i := range 5 {
		g.acquire(func() { order = append(order, i); held++ })
	}
	if held != 2 {
		t.Fatalf("%d holders of a gate of 2", held)
	}
	g.release()
	g.release()
	g.release()
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4}, order); diff != "" {
		t.Errorf("admission order (-want +got):\n%s", diff)
	}
	g.release()
	g.release()
	if g.free != 2 {
		t.Errorf("free slots after every release: %d, want 2", g.free)
	}
}

// TestRoundRobin checks the round-robin discipline against schedules
// worked out by hand on two cores with a 4 ms quantum.
func TestRoundRobin(t *testing.T) {
	type job struct {
		at   time.Duration
		work time.Duration
		par  float64
	}
	ms := time.Millisecond
	tests := []struct {
		name string
		jobs []job
		want []time.Duration
	}{
		// Short jobs run to completion in arrival order, two at a time:
		// the third waits for the first core to free.
		{"fifo", []job{{0, 1 * ms, 1}, {0, 2 * ms, 1}, {0, 1 * ms, 1}},
			[]time.Duration{1 * ms, 2 * ms, 2 * ms}},
		// A long job is cut into quanta: with a second long job and a
		// short one, the short one waits only for the first quantum.
		{"quantum", []job{{0, 10 * ms, 1}, {0, 10 * ms, 1}, {0, 1 * ms, 1}},
			// A and B run 0-4 and queue again behind C. C and A run from 4:
			// C ends at 5, B runs 5-9; A runs 4-8 and, a core being free,
			// 8-10; B's last 2 ms run 9-11.
			[]time.Duration{10 * ms, 11 * ms, 5 * ms}},
		// A job of parallelism 2 runs as two threads: its critical path
		// work/par on one core, the rest beside it.
		{"parallel", []job{{0, 6 * ms, 2}}, []time.Duration{3 * ms}},
		// Parallelism 1.5: 4 ms on the path, 2 ms beside it.
		{"fractional", []job{{0, 6 * ms, 1.5}}, []time.Duration{4 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := sched.NewVirtual(t0)
			p := NewRoundRobin(clk, 2, 4*ms)
			got := make([]time.Duration, len(tt.jobs))
			for i, j := range tt.jobs {
				clk.AfterFunc(j.at, func() {
					p.Run(j.work, j.par, func() { got[i] = clk.Now().Sub(t0) })
				})
			}
			clk.Run(0)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("completion times (-want +got):\n%s", diff)
			}
			if p.Running() != 0 {
				t.Errorf("%d jobs still running", p.Running())
			}
			var work time.Duration
			for _, j := range tt.jobs {
				work += j.work
			}
			if p.Busy() != work {
				t.Errorf("busy %v for %v of work", p.Busy(), work)
			}
		})
	}
}
