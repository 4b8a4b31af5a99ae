package device

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/sched"
	"github.com/batchtune/batchtune/emulator/tensor"
)

var gpu = AcceleratorSpec{
	LaunchUS: 1000, ItemUS: 250, KneeItems: 16, Jitter: 0.03,
	MemoryMiB: 16384, WeightsMiB: 6144, ActivationKiBPerItem: 6144,
	ColdRuns: 1, ColdFactor: 8,
}

func TestAcceleratorCostCurve(t *testing.T) {
	// Throughput (rows per second of device time) must rise with the batch
	// and flatten towards 1/ItemUS; small batches cost nearly the same.
	prev := 0.0
	for _, rows := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512} {
		d := gpu.WarmTime(rows)
		tput := float64(rows) / d.Seconds()
		if tput <= prev {
			t.Errorf("throughput at %d rows = %.0f/s, not above %.0f/s at the previous size", rows, tput, prev)
		}
		if limit := 1e6 / gpu.ItemUS; tput >= limit {
			t.Errorf("throughput at %d rows = %.0f/s, at or above the saturated limit %.0f/s", rows, tput, limit)
		}
		prev = tput
	}
	if r := float64(gpu.WarmTime(8)) / float64(gpu.WarmTime(1)); r > 1.2 {
		t.Errorf("8 rows cost %.2fx one row; below the knee a batch should be nearly free", r)
	}
	if r := float64(gpu.WarmTime(512)) / float64(gpu.WarmTime(256)); r < 1.9 {
		t.Errorf("512 rows cost %.2fx 256 rows; past the knee cost should be nearly linear", r)
	}
}

func TestExecTime(t *testing.T) {
	warm := gpu.WarmTime(32)
	tests := []struct {
		name  string
		prior int
		z     float64
		want  time.Duration
	}{
		{"cold first run", 0, 0, time.Duration(float64(warm) * 8)},      // ColdRuns=1: the first run pays ColdFactor
		{"warm second run", 1, 0, warm},                                 // then the curve
		{"jitter one sigma", 1, 1, time.Duration(float64(warm) * 1.03)}, // Jitter is the relative sigma
		{"jitter clamped", 1, 100, time.Duration(float64(warm) * 1.09)}, // at 3 sigma
	}
	for _, tt := range tests {
		if got := gpu.ExecTime(32, tt.prior, tt.z); got != tt.want {
			t.Errorf("%s: ExecTime = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMemory(t *testing.T) {
	if got := gpu.MaxRows(); got != 1706 {
		t.Errorf("MaxRows = %d, want (16384-6144)/6 = 1706", got)
	}
	if gpu.MemoryBytes(1706) > int64(gpu.MemoryMiB*(1<<20)) || gpu.MemoryBytes(1707) <= int64(gpu.MemoryMiB*(1<<20)) {
		t.Errorf("MemoryBytes disagrees with MaxRows at the boundary")
	}
}

func TestSpecValidate(t *testing.T) {
	var ps configs.Problems
	AcceleratorSpec{ItemUS: -1, MemoryMiB: 1, WeightsMiB: 2, ColdRuns: 2, ColdFactor: 0.5}.Validate("accelerator", &ps)
	CPUSpec{Hidden: []int{4, 0}}.Validate("cpu", &ps)
	var fields []string
	for _, p := range ps {
		fields = append(fields, p.Field)
	}
	want := []string{"accelerator.item_us", "accelerator.weights_mib", "accelerator.activation_kib_per_item", "accelerator.cold_factor", "cpu.hidden[1]"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("problem fields (-want +got)\n%s", diff)
	}
}

// TestReserveInOrder: the device runs executions one after another in
// submission order, in virtual time, counting each size towards warm.
func TestReserveInOrder(t *testing.T) {
	t0 := time.Unix(0, 0)
	spec := AcceleratorSpec{LaunchUS: 1000, ItemUS: 100, MemoryMiB: 1, ActivationKiBPerItem: 1, ColdRuns: 1, ColdFactor: 3}
	a := NewAccelerator(spec, HostSpec{}, 1, 1, NewRuntime(1, 1, 0), sched.NewVirtual(t0), 1)
	d1 := spec.WarmTime(4)
	s1, e1 := a.Reserve(t0, 4)                       // cold
	s2, e2 := a.Reserve(t0.Add(time.Microsecond), 4) // warm, queued behind the first
	s3, e3 := a.Reserve(e2.Add(time.Second), 4)      // device idle again: starts at once
	want := [][2]time.Time{
		{t0, t0.Add(3 * d1)},
		{e1, e1.Add(d1)},
		{e2.Add(time.Second), e2.Add(time.Second + d1)},
	}
	got := [][2]time.Time{{s1, e1}, {s2, e2}, {s3, e3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reservations (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]int{4}, a.WarmSizes()); diff != "" {
		t.Errorf("warm sizes (-want +got)\n%s", diff)
	}
}

func TestParallelForCoversOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads, DefaultSpin)
		for _, n := range []int{0, 1, 2, 7, 100} {
			hits := make([]int32, n)
			var shards atomic.Int32
			p.ParallelFor(n, func(lo, hi int) {
				shards.Add(1)
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads %d n %d: index %d ran %d times", threads, n, i, h)
				}
			}
			if want := min(n, threads); int(shards.Load()) != want && n > 0 {
				t.Errorf("threads %d n %d: %d shards, want %d", threads, n, shards.Load(), want)
			}
		}
		p.Close()
	}
}

// TestInterBoundsConcurrency: no more Runs hold an inter-op slot at once
// than there are slots.
func TestInterBoundsConcurrency(t *testing.T) {
	rt := NewRuntime(1, 2, 0)
	defer rt.Close()
	var cur, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := rt.Inter(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			n := cur.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			cur.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if peak.Load() != 2 {
		t.Errorf("peak concurrent holders = %d, want 2", peak.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	r1, _ := rt.Inter(ctx)
	r2, _ := rt.Inter(ctx)
	cancel()
	if _, err := rt.Inter(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Inter with all slots taken and ctx cancelled = %v, want context.Canceled", err)
	}
	r1()
	r2()
}

// TestCPUMatchesReference: the sharded, blocked MLP computes the same as a
// plain triple loop, for several thread counts and batch sizes.
func TestCPUMatchesReference(t *testing.T) {
	for _, intra := range []int{1, 3} {
		rt := NewRuntime(intra, 1, 0)
		m := NewCPU(CPUSpec{Hidden: []int{16, 9}}, HostSpec{}, 5, 2, rt, 42)
		for _, rows := range []int{1, 9, 20} {
			x := tensor.Tensor{Shape: []int64{int64(rows), 5}, Values: make([]float32, rows*5)}
			for i := range x.Values {
				x.Values[i] = float32(math.Sin(float64(i)))
			}
			got, err := m.Run(context.Background(), x)
			if err != nil {
				t.Fatal(err)
			}
			want := x.Values
			for _, l := range m.layers {
				out := make([]float32, rows*l.nout)
				for r := 0; r < rows; r++ {
					for j := 0; j < l.nout; j++ {
						acc := l.b[j]
						for k := 0; k < l.nin; k++ {
							acc += want[r*l.nin+k] * l.w[k*l.nout+j]
						}
						if l.relu && acc < 0 {
							acc = 0
						}
						out[r*l.nout+j] = acc
					}
				}
				want = out
			}
			if diff := cmp.Diff(want, got.Values, cmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-4 })); diff != "" {
				t.Errorf("intra %d rows %d (-want +got)\n%s", intra, rows, diff)
			}
			if diff := cmp.Diff([]int64{int64(rows), 2}, got.Shape); diff != "" {
				t.Errorf("shape (-want +got)\n%s", diff)
			}
		}
		rt.Close()
	}
}

// TestAcceleratorRun: Run takes at least the modelled device time (a lower
// bound the device guarantees), refuses batches beyond memory and inputs
// of the wrong width, and is deterministic in its outputs.
func TestAcceleratorRun(t *testing.T) {
	spec := AcceleratorSpec{LaunchUS: 20000, ItemUS: 10, MemoryMiB: 10, ActivationKiBPerItem: 1024}
	rt := NewRuntime(2, 2, 0)
	defer rt.Close()
	a := NewAccelerator(spec, HostSpec{PreprocessRounds: 4}, 3, 1, rt, sched.Real(), 1)
	x := tensor.Tensor{Shape: []int64{2, 3}, Values: []float32{1, 2, 3, 4, 5, 6}}
	start := time.Now()
	y1, err := a.Run(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < spec.WarmTime(2) {
		t.Errorf("Run took %v, less than the device time %v", took, spec.WarmTime(2))
	}
	y2, _ := a.Run(context.Background(), x)
	if diff := cmp.Diff(y1, y2); diff != "" {
		t.Errorf("outputs differ between runs (-first +second)\n%s", diff)
	}
	for _, v := range y1.Values {
		if v <= 0 || v >= 1 {
			t.Errorf("score %v outside (0, 1)", v)
		}
	}
	big := tensor.Tensor{Shape: []int64{11, 3}, Values: make([]float32, 33)}
	if _, err := a.Run(context.Background(), big); !errors.Is(err, ErrOOM) {
		t.Errorf("11 rows on a 10-row device: %v, want ErrOOM", err)
	}
	if _, err := a.Run(context.Background(), tensor.Tensor{Shape: []int64{1, 4}, Values: make([]float32, 4)}); !errors.Is(err, ErrShape) {
		t.Errorf("4 features into a 3-feature model: %v, want ErrShape", err)
	}
}

func TestCalibrate(t *testing.T) {
	rt := NewRuntime(1, 1, 0)
	defer rt.Close()
	m := NewCPU(CPUSpec{Hidden: []int{64}}, HostSpec{}, 32, 1, rt, 1)
	got, err := Calibrate(context.Background(), m, []int{1, 16}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Rows != 1 || got[1].Rows != 16 || got[0].Executions != 3 {
		t.Fatalf("Calibrate = %+v", got)
	}
	for _, s := range got {
		if s.Mean <= 0 || s.Min <= 0 || s.Min > s.Mean {
			t.Errorf("sample %+v: want 0 < min <= mean", s)
		}
	}
}
