package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/emulator/sim"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/search/replay"
)

// capacityTrial is the spec's capacity measurement of trial tr.
func capacityTrial(sp *surfaceSpec, tr sim.Trial) sim.CapacityTrial {
	return sim.CapacityTrial{
		Trial: tr, BurstConcurrency: sp.Concurrency, SLO: time.Duration(sp.SLO), ErrorBudget: sp.ErrorBudget,
		Search: capacity.Options{Resolution: sp.Resolution, MaxSteps: sp.MaxSteps},
	}
}

// simulateCapacity measures one run of a max_capacity surface: the
// capacity, its bracket, the knee's figures and every step (rounded: a
// surface records what a tuner would read, not float noise).
func simulateCapacity(ctx context.Context, sp *surfaceSpec, tr sim.Trial) (replay.Measurement, error) {
	r, err := sim.MeasureCapacity(ctx, capacityTrial(sp, tr))
	if err != nil {
		return replay.Measurement{}, err
	}
	if r.LoadFailed {
		return replay.Measurement{LoadFailed: !r.OOM, OOM: r.OOM}, nil
	}
	round := func(v float64) float64 { return math.Round(v*10) / 10 }
	c := round(r.Capacity)
	m := replay.Measurement{Capacity: &c, Upper: round(r.Upper)}
	if m.Upper != 0 && m.Upper <= c { // rounding met the two ends
		m.Upper = c + 0.1
	}
	for _, s := range r.Steps {
		m.Steps = append(m.Steps, replay.Step{Rate: round(s.Offered), QPS: round(s.Achieved),
			P99Micros: float64(s.Quantile.Microseconds()), ErrorRate: s.ErrorRate, Meets: s.Meets})
	}
	if knee, ok := r.Knee(); ok {
		m.QPS, m.ErrorRate = round(knee.Achieved), knee.ErrorRate
		m.P99Micros = float64(max(knee.Quantile.Microseconds(), 1))
	}
	return m, nil
}

// capcheckCmd checks the step search against brute force: on n
// configurations of a max_capacity spec's space (the seeds' recipe, TF's
// defaults nearest, and random runnable ones), the capacity the search
// finds against a sweep of -rates rates from -lo to -hi times it, each
// step measured as the search measures it (the same seed rule).
func capcheckCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("capcheck", flag.ContinueOnError)
	specPath := fs.String("spec", "", "a max_capacity surface spec (JSON)")
	n := fs.Int("n", 5, "configurations to check")
	rates := fs.Int("rates", 20, "rates in each sweep")
	lo := fs.Float64("lo", 0.6, "the sweep's lowest rate, times the capacity found")
	hi := fs.Float64("hi", 1.4, "the sweep's highest rate, times the capacity found")
	seed := fs.Uint64("seed", 1, "seeds the choice of configurations and the runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *specPath == "" {
		return fmt.Errorf("capcheck: -spec is required")
	}
	sp, cal, m, err := loadSpec(*specPath)
	if err != nil {
		return err
	}
	if sp.Objective != objective.MaxCapacity {
		return fmt.Errorf("capcheck: %s: objective must be max_capacity, got %s", *specPath, sp.Objective)
	}
	surf, err := replay.NewSurface(replay.Header{Format: replay.Format, Name: sp.Name, Objective: sp.Objective, Concurrency: sp.Concurrency,
		SLO: replay.Duration(sp.SLO), ErrorBudget: sp.ErrorBudget, Cores: cal.Cores, GPUs: sp.GPUs, Space: sp.Space})
	if err != nil {
		return err
	}
	space := surf.Space()
	runnable, err := space.Runnable(ctx)
	if err != nil {
		return err
	}
	picks := []search.Config{space.Recipe(), space.Defaults()}
	rng := rand.New(rand.NewPCG(*seed, 12))
	for len(picks) < *n+8 && len(picks) < len(runnable)+2 {
		picks = append(picks, runnable[rng.IntN(len(runnable))])
	}
	res := cmp.Or(sp.Resolution, 0.05)
	fmt.Printf("# surfacetool capcheck -spec %s -n %d -rates %d -lo %g -hi %g -seed %d\n", *specPath, *n, *rates, *lo, *hi, *seed)
	fmt.Printf("# step %s warmup + %s measured; SLO %s, error budget %g; resolution %g\n", time.Duration(sp.Warmup), time.Duration(sp.Duration), time.Duration(sp.SLO), sp.ErrorBudget, res)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "config\tsearch [lo, hi)\tsteps\tsweep [lo, hi)\tsweep steps met above the first broken\tsearch/sweep\tagree")
	checked, agreed := 0, 0
	seen := map[string]bool{}
	for _, c := range picks {
		if checked == *n {
			break
		}
		if seen[c.Key()] || len(space.Check(c)) > 0 {
			continue
		}
		seen[c.Key()] = true
		get := func(name string) int { v, _ := c.Get(name); return int(v) }
		grpc := sp.GRPCMaxThreads
		if v, ok := c.Get(search.GRPCMaxThreads); ok {
			grpc = int(v)
		}
		ct := capacityTrial(sp, sim.Trial{Model: m.Desc, Batching: space.Batching(c), IntraOp: get(search.IntraOpParallelism), InterOp: get(search.InterOpParallelism),
			GRPCMaxThreads: grpc, Warmup: time.Duration(sp.Warmup), Duration: time.Duration(sp.Duration), Calibration: cal, Seed: *seed})
		r, err := sim.MeasureCapacity(ctx, ct)
		if err != nil {
			return err
		}
		if r.LoadFailed || r.Capacity == 0 {
			continue // nothing to sweep around
		}
		sw, err := sim.SweepCapacity(ctx, ct, *lo*r.Capacity, *hi*r.Capacity, *rates)
		if err != nil {
			return err
		}
		// Steps that met above the first that broke: how far the verdict
		// is from monotone in the rate.
		above, broke := 0, false
		for _, s := range sw.Steps {
			if s.Meets && broke {
				above++
			}
			broke = broke || !s.Meets
		}
		ok := sim.BracketsAgree(r.Result, sw, res)
		checked++
		if ok {
			agreed++
		}
		fmt.Fprintf(tw, "%s\t[%.1f, %.1f)\t%d\t[%.1f, %.1f)\t%d\t%.3f\t%v\n", c, r.Capacity, r.Upper, len(r.Steps), sw.Capacity, sw.Upper, above, r.Capacity/sw.Capacity, ok)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("%d of %d configurations agree within the resolution (each lower end at most %g above the other's upper end)\n", agreed, checked, res)
	return nil
}
