package device

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/batchtune/batchtune/emulator/sched"
	"github.com/batchtune/batchtune/emulator/tensor"
)

// Model executes batches: rows × Features() in, rows × Outputs() out.
type Model interface {
	Features() int
	Outputs() int
	// MaxRows is the largest batch the device can hold.
	MaxRows() int
	// Run executes one batch. It blocks for as long as the batch takes.
	Run(ctx context.Context, x tensor.Tensor) (tensor.Tensor, error)
}

// checkShape verifies x is rows × features.
func checkShape(x tensor.Tensor, features int) error {
	if len(x.Shape) != 2 || int(x.Shape[1]) != features || len(x.Values) != x.Rows()*features {
		return fmt.Errorf("%w: got %s, want [rows,%d]", ErrShape, tensor.ShapeString(x.Shape), features)
	}
	return nil
}

// preprocess is the host-side feature transform: rounds of a bounded
// rational map per feature, sharded by rows over the intra-op pool.
func preprocess(pool *Pool, x tensor.Tensor, rounds int) tensor.Tensor {
	if rounds <= 0 {
		return x
	}
	out := tensor.Tensor{Shape: x.Shape, Values: make([]float32, len(x.Values))}
	f := x.RowLen()
	pool.ParallelFor(x.Rows(), func(lo, hi int) {
		in, o := x.Values[lo*f:hi*f], out.Values[lo*f:hi*f]
		for i, v := range in {
			for r := 0; r < rounds; r++ {
				v = v - v*v*v/(3+v*v)
			}
			o[i] = v
		}
	})
	return out
}

// dense computes out = act(in·w + b) for rows of nin inputs, w stored
// [nin][nout], sharded over output columns. Rows go in blocks of 8 so each
// weight row is reused from cache across the block: batching pays on a CPU
// because weights are streamed once per block instead of once per row.
func dense(pool *Pool, in []float32, rows, nin int, w, b []float32, nout int, relu bool) []float32 {
	out := make([]float32, rows*nout)
	pool.ParallelFor(nout, func(jlo, jhi int) {
		const block = 8
		for r0 := 0; r0 < rows; r0 += block {
			r1 := min(r0+block, rows)
			for r := r0; r < r1; r++ {
				copy(out[r*nout+jlo:r*nout+jhi], b[jlo:jhi])
			}
			for k := 0; k < nin; k++ {
				wk := w[k*nout+jlo : k*nout+jhi]
				for r := r0; r < r1; r++ {
					a := in[r*nin+k]
					o := out[r*nout+jlo : r*nout+jhi]
					o = o[:len(wk)]
					for j, wv := range wk {
						o[j] += a * wv
					}
				}
			}
			if relu {
				for r := r0; r < r1; r++ {
					o := out[r*nout+jlo : r*nout+jhi]
					for j, v := range o {
						if v < 0 {
							o[j] = 0
						}
					}
				}
			}
		}
	})
	return out
}

// layer is one dense layer's parameters.
type layer struct {
	nin, nout int
	w, b      []float32
	relu      bool
}

func newLayer(rng *rand.Rand, nin, nout int, relu bool) layer {
	l := layer{nin: nin, nout: nout, w: make([]float32, nin*nout), b: make([]float32, nout), relu: relu}
	scale := 1 / math.Sqrt(float64(nin))
	for i := range l.w {
		l.w[i] = float32(rng.NormFloat64() * scale)
	}
	for i := range l.b {
		l.b[i] = float32(rng.NormFloat64() * 0.01)
	}
	return l
}

// Accelerator is the accelerator model. Executions on the device are in
// order: a batch starts on the device when the previous one has finished.
type Accelerator struct {
	spec     AcceleratorSpec
	host     HostSpec
	rt       *Runtime
	clock    sched.Clock
	features int
	proj     layer

	mu        sync.Mutex
	busyUntil time.Time
	runs      map[int]int
	rng       *rand.Rand
}

var _ Model = (*Accelerator)(nil)

// NewAccelerator returns an accelerator model computing outputs values per
// row from features inputs, its host work on rt, its device time on clock,
// its jitter and weights seeded by seed.
func NewAccelerator(spec AcceleratorSpec, host HostSpec, features, outputs int, rt *Runtime, clock sched.Clock, seed uint64) *Accelerator {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	return &Accelerator{
		spec: spec, host: host, rt: rt, clock: clock, features: features,
		proj: newLayer(rng, features, outputs, false),
		runs: map[int]int{},
		rng:  rand.New(rand.NewPCG(seed, 0x717e7)),
	}
}

// Features implements Model.
func (a *Accelerator) Features() int { return a.features }

// Outputs implements Model.
func (a *Accelerator) Outputs() int { return a.proj.nout }

// MaxRows implements Model: the largest batch that fits device memory.
func (a *Accelerator) MaxRows() int { return a.spec.MaxRows() }

// Spec returns the accelerator's cost model.
func (a *Accelerator) Spec() AcceleratorSpec { return a.spec }

// Reserve books the device for one execution of rows submitted at now and
// returns when it starts (after the executions already booked) and ends.
// It draws the jitter and counts the execution towards warming that batch
// size. Run calls it and then waits; a simulation can call it instead of
// Run to get the device's timing without doing the host work.
func (a *Accelerator) Reserve(now time.Time, rows int) (start, end time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prior := a.runs[rows]
	a.runs[rows] = prior + 1
	d := a.spec.ExecTime(rows, prior, a.rng.NormFloat64())
	start = now
	if a.busyUntil.After(start) {
		start = a.busyUntil
	}
	end = start.Add(d)
	a.busyUntil = end
	return start, end
}

// WarmSizes returns the batch sizes that have run at least ColdRuns times.
func (a *Accelerator) WarmSizes() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []int
	for rows, n := range a.runs {
		if n >= a.spec.ColdRuns {
			out = append(out, rows)
		}
	}
	sort.Ints(out)
	return out
}

// Run implements Model: preprocess on the host holding an inter-op thread,
// run on the device holding none, project and split on the host.
func (a *Accelerator) Run(ctx context.Context, x tensor.Tensor) (tensor.Tensor, error) {
	if err := checkShape(x, a.features); err != nil {
		return tensor.Tensor{}, err
	}
	rows := x.Rows()
	if rows > a.MaxRows() {
		return tensor.Tensor{}, fmt.Errorf("%w: batch of %d rows needs %d bytes, device has %d", ErrOOM, rows, a.spec.MemoryBytes(rows), int64(a.spec.MemoryMiB*(1<<20)))
	}
	release, err := a.rt.Inter(ctx)
	if err != nil {
		return tensor.Tensor{}, err
	}
	h := preprocess(a.rt.Intra, x, a.host.PreprocessRounds)
	release()

	_, end := a.Reserve(a.clock.Now(), rows)
	sleepUntil(a.clock, end)

	release, err = a.rt.Inter(ctx)
	if err != nil {
		return tensor.Tensor{}, err
	}
	defer release()
	y := dense(a.rt.Intra, h.Values, rows, a.features, a.proj.w, a.proj.b, a.proj.nout, false)
	for i, v := range y {
		y[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
	return tensor.Tensor{Shape: []int64{int64(rows), int64(a.proj.nout)}, Values: y}, nil
}

// sleepUntil blocks until clock reads t. Device time is not cancellable:
// a kernel once queued runs to the end.
func sleepUntil(clock sched.Clock, t time.Time) {
	d := t.Sub(clock.Now())
	if d <= 0 {
		return
	}
	done := make(chan struct{})
	clock.AfterFunc(d, func() { close(done) })
	<-done
}

// CPU is the CPU model: an MLP computed for real.
type CPU struct {
	host     HostSpec
	rt       *Runtime
	features int
	layers   []layer
}

var _ Model = (*CPU)(nil)

// NewCPU returns an MLP from features inputs through spec.Hidden to
// outputs, weights seeded by seed, computed on rt.
func NewCPU(spec CPUSpec, host HostSpec, features, outputs int, rt *Runtime, seed uint64) *CPU {
	rng := rand.New(rand.NewPCG(seed, 0x31337))
	c := &CPU{host: host, rt: rt, features: features}
	nin := features
	for _, h := range spec.Hidden {
		c.layers = append(c.layers, newLayer(rng, nin, h, true))
		nin = h
	}
	c.layers = append(c.layers, newLayer(rng, nin, outputs, false))
	return c
}

// Features implements Model.
func (c *CPU) Features() int { return c.features }

// Outputs implements Model.
func (c *CPU) Outputs() int { return c.layers[len(c.layers)-1].nout }

// MaxRows implements Model: host memory is not modelled.
func (c *CPU) MaxRows() int { return math.MaxInt32 }

// MACsPerRow is the multiply-accumulates one row costs.
func (c *CPU) MACsPerRow() int {
	n := 0
	for _, l := range c.layers {
		n += l.nin * l.nout
	}
	return n
}

// Run implements Model: the whole forward pass holds one inter-op thread;
// each layer is sharded over the intra-op pool.
func (c *CPU) Run(ctx context.Context, x tensor.Tensor) (tensor.Tensor, error) {
	if err := checkShape(x, c.features); err != nil {
		return tensor.Tensor{}, err
	}
	release, err := c.rt.Inter(ctx)
	if err != nil {
		return tensor.Tensor{}, err
	}
	defer release()
	rows := x.Rows()
	act := preprocess(c.rt.Intra, x, c.host.PreprocessRounds).Values
	for _, l := range c.layers {
		act = dense(c.rt.Intra, act, rows, l.nin, l.w, l.b, l.nout, l.relu)
	}
	return tensor.Tensor{Shape: []int64{int64(rows), int64(c.Outputs())}, Values: act}, nil
}

// Sample is the measured cost of one batch size.
type Sample struct {
	Rows       int
	Mean, Min  time.Duration
	Executions int
}

// Calibrate measures m's real cost per batch size: each size runs once
// unmeasured (so the accelerator's cold penalty is paid first), then reps
// times back to back, uncontended, on random inputs. For the CPU model it
// is the cost of the arithmetic at the runtime's thread counts; for the
// accelerator, host work plus device time.
func Calibrate(ctx context.Context, m Model, sizes []int, reps int) ([]Sample, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []Sample
	for _, rows := range sizes {
		x := tensor.Tensor{Shape: []int64{int64(rows), int64(m.Features())}, Values: make([]float32, rows*m.Features())}
		for i := range x.Values {
			x.Values[i] = float32(rng.NormFloat64())
		}
		s := Sample{Rows: rows, Min: time.Duration(math.MaxInt64)}
		var total time.Duration
		for i := 0; i <= reps; i++ {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			start := time.Now()
			if _, err := m.Run(ctx, x); err != nil {
				return out, err
			}
			d := time.Since(start)
			if i == 0 {
				continue
			}
			total += d
			s.Min = min(s.Min, d)
			s.Executions++
		}
		if s.Executions > 0 {
			s.Mean = total / time.Duration(s.Executions)
		}
		out = append(out, s)
	}
	return out, nil
}
