package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sim"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/search/replay"
)

// surfaceSpec says which surface to record: the study (objective, load,
// SLO, space) and how each configuration is simulated.
type surfaceSpec struct {
	Name        string `json:"name"`
	Model       string `json:"model"`
	Calibration string `json:"calibration"`

	// Objective max_capacity records a capacity per run (capacity.go):
	// Concurrency is then the burst that suggests the first rate, and
	// Warmup and Duration are each step's.
	Objective   search.ObjectiveKind `json:"objective"`
	Concurrency int                  `json:"concurrency,omitempty"`
	Rate        float64              `json:"rate,omitempty"`
	SLO         duration             `json:"slo"`
	ErrorBudget float64              `json:"error_budget"`
	GPUs        int                  `json:"gpus"`
	// GRPCMaxThreads is pinned for the whole surface (0: TF's default).
	GRPCMaxThreads int `json:"grpc_max_threads"`

	Repeats  int                 `json:"repeats"`
	Warmup   duration            `json:"warmup"`
	Duration duration            `json:"duration"`
	Seed     uint64              `json:"seed"`
	Space    []configs.ParamSpec `json:"space"`
	// Capacity search settings (max_capacity only; 0: capacity's
	// defaults, 5% and 10 steps).
	Resolution float64 `json:"resolution,omitempty"`
	MaxSteps   int     `json:"max_steps,omitempty"`
	// Notes are appended to the surface header's source.
	Notes string `json:"notes,omitempty"`
}

// surfaceCmd simulates every runnable configuration of a spec's space
// Repeats times and writes the surface.
func surfaceCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("surface", flag.ContinueOnError)
	specPath := fs.String("spec", "", "surface spec (JSON)")
	out := fs.String("o", "", "surface file to write (batchtune-surface/2)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "simulations in parallel")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *specPath == "" || *out == "" {
		return fmt.Errorf("surface: -spec and -o are required")
	}
	sp, cal, m, err := loadSpec(*specPath)
	if err != nil {
		return err
	}
	if sp.Repeats < 1 {
		return fmt.Errorf("surface: repeats must be at least 1")
	}
	started := time.Now()
	how := fmt.Sprintf("%d simulated runs per configuration, %s warmup + %s measured each; closed-loop clients over gRPC as the probe drives them",
		sp.Repeats, time.Duration(sp.Warmup), time.Duration(sp.Duration))
	if sp.Objective == objective.MaxCapacity {
		how = fmt.Sprintf("%d simulated capacity searches per configuration (emulator/sim MeasureCapacity: a %d-client closed-loop burst suggests the first rate, then capacity.Search brackets the highest open-loop rate within the SLO to %g, at most %d steps of %s warmup + %s measured, each judged as the tuner judges a step)",
			sp.Repeats, sp.Concurrency, cmp.Or(sp.Resolution, 0.05), cmp.Or(sp.MaxSteps, 10), time.Duration(sp.Warmup), time.Duration(sp.Duration))
	}
	h := replay.Header{
		Format: replay.Format, Name: sp.Name,
		Source: fmt.Sprintf("surfacetool surface -spec %s (emulator/sim: the stand-in's scheduler and device model in virtual time, host work priced by %s); "+
			"%s; --grpc_max_threads=%d pinned; recorded %s. %s",
			*specPath, sp.Calibration, how, sp.GRPCMaxThreads, started.UTC().Format("2006-01-02"), sp.Notes),
		Model: cal.Model, Device: m.Desc.Device,
		Objective: sp.Objective, Concurrency: sp.Concurrency, Rate: sp.Rate,
		SLO: replay.Duration(sp.SLO), ErrorBudget: sp.ErrorBudget, Cores: cal.Cores, GPUs: sp.GPUs,
		Space: sp.Space,
	}
	if sp.GRPCMaxThreads > 0 && !slices.ContainsFunc(sp.Space, func(p configs.ParamSpec) bool { return p.Name == search.GRPCMaxThreads }) {
		h.Fixed = map[string]int64{search.GRPCMaxThreads: int64(sp.GRPCMaxThreads)}
	}
	surf, err := replay.NewSurface(h)
	if err != nil {
		return err
	}
	space := surf.Space()
	runnable, err := space.Runnable(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d configurations, %d runnable, %d runs each\n", sp.Name, space.Size(), len(runnable), sp.Repeats)

	var mu sync.Mutex
	done := 0
	results, err := simulateAll(ctx, *workers, runnable, func(c search.Config) ([]replay.Measurement, error) {
		ms, err := simulateConfig(ctx, sp, m.Desc, cal, space, c, 0, sp.Repeats)
		mu.Lock()
		done++
		if done%100 == 0 {
			fmt.Printf("  %d/%d configurations after %s\n", done, len(runnable), time.Since(started).Round(time.Second))
		}
		mu.Unlock()
		return ms, err
	})
	if err != nil {
		return err
	}
	for _, ms := range results {
		for _, m := range ms {
			if err := surf.Add(m); err != nil {
				return err
			}
		}
	}
	if err := writeSurface(surf, *out); err != nil {
		return err
	}
	fmt.Printf("wrote %s in %s\n", *out, time.Since(started).Round(time.Second))
	return describe(surf)
}

// writeSurface writes surf to path through a temporary file renamed into
// place, so that an interrupted write leaves the old file whole.
func writeSurface(surf *replay.Surface, path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := surf.Encode(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadSpec reads a surface spec with the calibration and model it names.
func loadSpec(path string) (*surfaceSpec, *sim.Calibration, *model.Model, error) {
	var sp surfaceSpec
	if err := readJSON(path, &sp); err != nil {
		return nil, nil, nil, err
	}
	cal, err := sim.LoadCalibration(sp.Calibration)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := model.Load(sp.Model)
	if err != nil {
		return nil, nil, nil, err
	}
	return &sp, cal, m, nil
}

// simulateConfig runs one configuration count times, repeats first,
// first+1, ..., each with a seed drawn from the spec's seed, the
// configuration and the repeat's number.
func simulateConfig(ctx context.Context, sp *surfaceSpec, desc model.Description, cal *sim.Calibration, space *search.Space, c search.Config, first, count int) ([]replay.Measurement, error) {
	vals := make([]int64, len(c))
	for i, a := range c {
		vals[i] = a.Value
	}
	get := func(name string) int {
		v, _ := c.Get(name)
		return int(v)
	}
	grpc := sp.GRPCMaxThreads
	if _, ok := c.Get(search.GRPCMaxThreads); ok {
		grpc = get(search.GRPCMaxThreads)
	}
	var out []replay.Measurement
	for r := first; r < first+count; r++ {
		h := fnv.New64a()
		h.Write([]byte(strconv.FormatUint(sp.Seed, 10) + "|" + c.Key() + "|" + strconv.Itoa(r)))
		tr := sim.Trial{
			Model: desc, Batching: space.Batching(c), IntraOp: get(search.IntraOpParallelism), InterOp: get(search.InterOpParallelism),
			GRPCMaxThreads: grpc, Load: sim.Load{Concurrency: sp.Concurrency, Rate: sp.Rate},
			Warmup: time.Duration(sp.Warmup), Duration: time.Duration(sp.Duration), Calibration: cal, Seed: h.Sum64(),
		}
		if sp.Objective == objective.MaxCapacity {
			m, err := simulateCapacity(ctx, sp, tr)
			if err != nil {
				return nil, err
			}
			m.Config = vals
			out = append(out, m)
			continue
		}
		res, err := sim.Run(ctx, tr)
		if err != nil {
			return nil, err
		}
		m := replay.Measurement{Config: vals, LoadFailed: res.LoadFailed && !res.OOM, OOM: res.OOM}
		if !res.LoadFailed {
			m.QPS, m.ErrorRate = res.QPS, res.ErrorRate
			m.P99Micros = float64(res.Latency.P99.Microseconds())
			if m.QPS > 0 && m.P99Micros == 0 {
				m.P99Micros = 1
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// describe prints what a tuner faces on the surface: the feasible share,
// the best configuration, how many come within 95% and 99% of it, and
// where TF's defaults and the seeds' recipe land.
func describe(s *replay.Surface) error {
	best, bt, ok := s.Best()
	pts := s.Points()
	feasible, failed := 0, 0
	var values []float64
	for _, p := range pts {
		t, _ := s.Truth(p.Config)
		if t.Failed {
			failed++
		}
		if t.Feasible {
			feasible++
			values = append(values, t.Value)
		}
	}
	fmt.Printf("%d configurations recorded: %d truly feasible (%.1f%%), %d failed to load\n", len(pts), feasible, 100*float64(feasible)/float64(len(pts)), failed)
	if !ok {
		fmt.Println("no feasible configuration")
		return nil
	}
	dir := s.Objective().Direction()
	ratio := func(v float64) float64 {
		if dir == search.Minimize {
			return bt.Value / v
		}
		return v / bt.Value
	}
	n95, n99 := 0, 0
	for _, v := range values {
		if ratio(v) >= 0.95 {
			n95++
		}
		if ratio(v) >= 0.99 {
			n99++
		}
	}
	capacity := s.Objective().Kind == objective.MaxCapacity
	if capacity {
		fmt.Printf("best: %s: capacity %.1f req/s (mean over runs; at the knee P99 %s, error rate %.4f)\n", best, bt.Value, bt.P99.Round(10*time.Microsecond), bt.ErrorRate)
	} else {
		fmt.Printf("best: %s: QPS %.1f, P99 %s, error rate %.4f\n", best, bt.QPS, bt.P99.Round(10*time.Microsecond), bt.ErrorRate)
	}
	fmt.Printf("within 95%% of the best: %d configurations (%.2f%%); within 99%%: %d (%.2f%%)\n",
		n95, 100*float64(n95)/float64(len(pts)), n99, 100*float64(n99)/float64(len(pts)))
	slices.Sort(values)
	if n := len(values); n > 0 {
		fmt.Printf("feasible objective: min %.1f, median %.1f, max %.1f\n", values[0], values[n/2], values[n-1])
	}
	for _, c := range []struct {
		name string
		c    search.Config
	}{{"TF defaults", s.Space().Defaults()}, {"seeds' recipe", s.Space().Recipe()}} {
		t, ok := s.Truth(c.c)
		if !ok {
			fmt.Printf("%s (%s): not runnable\n", c.name, c.c)
			continue
		}
		if capacity {
			fmt.Printf("%s (%s): feasible %v, capacity %.1f req/s (%.3f of best)\n", c.name, c.c, t.Feasible, t.Value, ratio(t.Value))
			continue
		}
		fmt.Printf("%s (%s): feasible %v, QPS %.1f (%.3f of best), P99 %s, error rate %.4f\n", c.name, c.c, t.Feasible, t.QPS, ratio(t.Value), t.P99.Round(10*time.Microsecond), t.ErrorRate)
	}
	return nil
}
