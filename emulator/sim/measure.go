package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/batchtune/batchtune/emulator/device"
	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sched"
	"github.com/batchtune/batchtune/emulator/tensor"
	"github.com/batchtune/batchtune/probe"
)

// HostOptions says what MeasureHost measures. Zero values take the
// defaults named.
type HostOptions struct {
	// Rows are the batch sizes; default 1, 2, 4, ..., 512.
	Rows []int
	// Intra are the intra-op thread counts; default 1, 2, 4, 8.
	Intra []int
	// Contention are the numbers of simultaneous executions measured
	// besides one (recorded as ContentionSamples); default 2 and 4. Empty
	// after defaults only when set to []int{}.
	Contention []int
	// MinTime is how long each cell runs at least (default 300ms), in
	// Blocks blocks (default 5) of which the fastest is kept; MinReps is
	// how many executions each block takes at least (default 5).
	MinTime time.Duration
	MinReps int
	Blocks  int
	// Passes is how many times the whole grid is measured, one pass after
	// the other (default 3); each cell keeps its fastest measurement.
	Passes int
	// Logger receives a line per cell; nil discards.
	Logger *slog.Logger
}

func (o *HostOptions) defaults() {
	if o.Rows == nil {
		for r := 1; r <= 512; r *= 2 {
			o.Rows = append(o.Rows, r)
		}
	}
	if o.Intra == nil {
		o.Intra = []int{1, 2, 4, 8}
	}
	if o.Contention == nil {
		o.Contention = []int{2, 4}
	}
	if o.MinTime == 0 {
		o.MinTime = 300 * time.Millisecond
	}
	if o.MinReps == 0 {
		o.MinReps = 5
	}
	if o.Blocks == 0 {
		o.Blocks = 5
	}
	if o.Passes == 0 {
		o.Passes = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// MeasureHost measures the host work of d's batches by running its real
// device model (emulator/device) on this machine: for each intra-op thread
// count and batch size, executions one at a time (HostPoint: CPU time of
// the whole process and wall time per execution) and, for Contention, k
// at once on one shared runtime (ContentionSample). The grid is measured
// Passes times and each cell keeps its least disturbed measurement. The accelerator's
// device time is set to zero so only host work is timed; its preprocessing
// (Main) is told apart from its projection (After) by measuring the model
// again without preprocessing. The process should be otherwise idle: its
// CPU time is read with getrusage. The result has Host and Contention
// filled; the caller adds Serving and Noise.
func MeasureHost(ctx context.Context, name string, d model.Description, o HostOptions) (*Calibration, error) {
	o.defaults()
	if _, ok := probe.ProcessCPU(); !ok {
		return nil, fmt.Errorf("%w: this platform cannot read process CPU time", ErrCalibration)
	}
	cal := &Calibration{Format: CalibrationFormat, Model: name, Device: d.Device, Cores: runtime.GOMAXPROCS(0)}
	build := func(intra, inter int, withPre bool) (device.Model, *device.Runtime, error) {
		rt := device.NewRuntime(intra, inter, d.Host.Spin())
		host := d.Host
		switch d.Device {
		case model.CPU:
			if d.CPU == nil {
				return nil, nil, fmt.Errorf("%w: model.cpu is required for a cpu model", ErrTrial)
			}
			return device.NewCPU(*d.CPU, host, d.Features(), d.Outputs(), rt, d.Seed), rt, nil
		case model.Accelerator:
			if d.Accelerator == nil {
				return nil, nil, fmt.Errorf("%w: model.accelerator is required for an accelerator model", ErrTrial)
			}
			if !withPre {
				host.PreprocessRounds = 0
			}
			// A device that takes no time: Run then costs only its host
			// work. (Device time comes from the spec in a simulation.)
			spec := *d.Accelerator
			spec.LaunchUS, spec.ItemUS, spec.KneeItems, spec.Jitter, spec.ColdRuns = 0, 1e-9, 0, 0, 0
			spec.MemoryMiB, spec.WeightsMiB, spec.ActivationKiBPerItem = 1<<30, 0, 1e-6
			return device.NewAccelerator(spec, host, d.Features(), d.Outputs(), rt, sched.Real(), d.Seed), rt, nil
		}
		return nil, nil, fmt.Errorf("%w: model.device must be %s or %s, got %q", ErrTrial, model.Accelerator, model.CPU, d.Device)
	}
	measure := func(intra, k, rows int, withPre bool) (cell, error) {
		m, rt, err := build(intra, k, withPre)
		if err != nil {
			return cell{}, err
		}
		defer rt.Close()
		return runCell(ctx, m, k, rows, o.MinTime, o.MinReps, o.Blocks)
	}
	// Every cell is measured once per pass, the passes one after the
	// other, and the fastest of its measurements is kept: another
	// process that takes the machine for a while disturbs one pass of a
	// cell, not all of them.
	type key struct {
		intra, k, rows int
		pre            bool
	}
	best := map[key]cell{}
	keep := func(kk key) (cell, error) {
		c, err := measure(kk.intra, kk.k, kk.rows, kk.pre)
		if err != nil {
			return c, err
		}
		if b, ok := best[kk]; !ok || c.wallUS < b.wallUS {
			best[kk] = c
		}
		return c, nil
	}
	for pass := range o.Passes {
		for _, intra := range o.Intra {
			for _, rows := range o.Rows {
				c, err := keep(key{intra, 1, rows, true})
				if err != nil {
					return nil, err
				}
				o.Logger.Info("host work", "pass", pass+1, "intra", intra, "rows", rows, "cpu_us", c.cpuUS, "wall_us", c.wallUS, "reps", c.reps)
				if d.Device == model.Accelerator {
					if _, err := keep(key{intra, 1, rows, false}); err != nil {
						return nil, err
					}
				}
				for _, k := range o.Contention {
					if _, err := keep(key{intra, k, rows, true}); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	for _, intra := range o.Intra {
		curve := HostCurve{Intra: intra}
		for _, rows := range o.Rows {
			full := best[key{intra, 1, rows, true}]
			p := HostPoint{Rows: rows, MainCPUus: full.cpuUS, MainWallUS: full.wallUS, CV: full.cv}
			if d.Device == model.Accelerator {
				proj := best[key{intra, 1, rows, false}]
				p.AfterCPUus, p.AfterWallUS = proj.cpuUS, proj.wallUS
				p.MainCPUus = math.Max(full.cpuUS-proj.cpuUS, 0)
				p.MainWallUS = math.Max(full.wallUS-proj.wallUS, full.wallUS/100)
			}
			curve.Points = append(curve.Points, p)
			for _, k := range o.Contention {
				c := best[key{intra, k, rows, true}]
				cal.Contention = append(cal.Contention, ContentionSample{Intra: intra, Rows: rows, K: k, WallUS: c.wallUS, CPUus: c.cpuUS})
			}
		}
		cal.Host = append(cal.Host, curve)
	}
	return cal, nil
}

// cell is one measured (model, k, rows) combination, per execution.
type cell struct {
	wallUS, cpuUS, cv float64
	reps              int
}

// runCell measures k goroutines executing batches of rows back to back,
// in blocks (after one unmeasured execution each): each block runs until
// minTime/blocks has passed and each goroutine has done minReps. Of the
// blocks, the one with the shortest wall time per execution is kept: work
// that other processes on the machine interrupted only ever looks slower,
// so the fastest block is the least disturbed. Within a block, wall time
// is one execution's median span when k is 1, and the elapsed time times
// k over the executions otherwise (each thread's time per execution,
// waits included); CPU time is the process's over the block's
// executions, divided by them; CV is the spread of single spans.
func runCell(ctx context.Context, m device.Model, k, rows int, minTime time.Duration, minReps, blocks int) (cell, error) {
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(k)))
	x := tensor.Tensor{Shape: []int64{int64(rows), int64(m.Features())}, Values: make([]float32, rows*m.Features())}
	for i := range x.Values {
		x.Values[i] = float32(rng.NormFloat64())
	}
	for range k {
		if _, err := m.Run(ctx, x); err != nil {
			return cell{}, err
		}
	}
	var best cell
	for b := range max(blocks, 1) {
		c, err := runBlock(ctx, m, x, k, minTime/time.Duration(max(blocks, 1)), minReps)
		if err != nil {
			return cell{}, err
		}
		if b == 0 || c.wallUS < best.wallUS {
			best = c
		}
	}
	return best, nil
}

func runBlock(ctx context.Context, m device.Model, x tensor.Tensor, k int, minTime time.Duration, minReps int) (cell, error) {
	var (
		mu    sync.Mutex
		walls []float64
		wg    sync.WaitGroup
		errs  = make(chan error, k)
	)
	runtime.GC()
	cpu0, _ := probe.ProcessCPU()
	start := time.Now()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []float64
			for i := 0; i < minReps || time.Since(start) < minTime; i++ {
				t0 := time.Now()
				if _, err := m.Run(ctx, x); err != nil {
					errs <- err
					return
				}
				mine = append(mine, float64(time.Since(t0).Nanoseconds())/1e3)
			}
			mu.Lock()
			walls = append(walls, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, _ := probe.ProcessCPU()
	close(errs)
	if err := <-errs; err != nil {
		return cell{}, err
	}
	n := len(walls)
	slices.Sort(walls)
	mean, sq := 0.0, 0.0
	for _, w := range walls {
		mean += w
	}
	mean /= float64(n)
	for _, w := range walls {
		sq += (w - mean) * (w - mean)
	}
	c := cell{wallUS: walls[n/2], cpuUS: float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(n), reps: n}
	if k > 1 {
		// With several executions at once, one execution's own span says
		// little (Go runs a short one to completion once it has a P, so
		// the wait comes between executions): what each thread needs per
		// execution is the elapsed time over its share of them.
		c.wallUS = float64(elapsed.Nanoseconds()) / 1e3 * float64(k) / float64(n)
	}
	if n > 1 && mean > 0 {
		c.cv = math.Sqrt(sq/float64(n-1)) / mean
	}
	return c, nil
}
