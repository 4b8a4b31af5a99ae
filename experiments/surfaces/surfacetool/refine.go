package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/search/replay"
)

// refineCmd pins down the truth of a surface's contenders. Three runs per
// configuration are enough noise for a strategy to meet, but not enough to
// say which configuration is best when the best ones sit within a few
// percent of each other and of the SLO: a lucky third run can make a
// configuration whose P99 is truly above the SLO the "best feasible" one.
// So every contender (a configuration whose mean so far reaches -within of
// the best objective and lies within -edge of the SLO or rate) gets -runs
// more simulated runs, marked as reference runs: they count in the truth
// and are never replayed to a strategy. The file is rewritten in place.
func refineCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("refine", flag.ContinueOnError)
	specPath := fs.String("spec", "", "the surface's spec (JSON)")
	path := fs.String("surface", "", "surface file to refine (rewritten)")
	runs := fs.Int("runs", 16, "reference runs per contender")
	within := fs.Float64("within", 0.85, "contenders reach this fraction of the best objective")
	edge := fs.Float64("edge", 0.25, "contenders lie within this fraction of the SLO (or rate) on the infeasible side")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "simulations in parallel")
	passes := fs.Int("passes", 6, "refine again while the best moves, at most this often")
	dry := fs.Bool("dry", false, "print how many contenders the first pass would refine, and stop")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *specPath == "" || *path == "" {
		return fmt.Errorf("refine: -spec and -surface are required")
	}
	sp, cal, m, err := loadSpec(*specPath)
	if err != nil {
		return err
	}
	surf, err := replay.Load(*path)
	if err != nil {
		return err
	}
	// Refining can move the best (a lucky best drops towards its truth),
	// which brings configurations into reach that were not contenders
	// before; so refine again until the best and everything within reach
	// of it have reference runs, or -passes is spent.
	started := time.Now()
	for pass := 1; pass <= *passes; pass++ {
		contenders, err := findContenders(surf, *within, *edge)
		if err != nil {
			return err
		}
		if *dry {
			fmt.Printf("%s: %d contenders\n", surf.Name, len(contenders))
			return nil
		}
		if len(contenders) == 0 {
			break
		}
		fmt.Printf("%s: pass %d: %d contenders, %d reference runs each\n", surf.Name, pass, len(contenders), *runs)
		results, err := simulateAll(ctx, *workers, contenders, func(c search.Config) ([]replay.Measurement, error) {
			return simulateConfig(ctx, sp, m.Desc, cal, surf.Space(), c, 1000, *runs)
		})
		if err != nil {
			return err
		}
		for _, ms := range results {
			for _, run := range ms {
				run.Reference = true
				if err := surf.Add(run); err != nil {
					return err
				}
			}
		}
		if pass == *passes {
			fmt.Printf("%s: -passes %d spent; the best may still move (run refine again)\n", surf.Name, *passes)
		}
	}
	if err := writeSurface(surf, *path); err != nil {
		return err
	}
	fmt.Printf("refined %s in %s\n", *path, time.Since(started).Round(time.Second))
	return describe(surf)
}

func hasReference(p replay.Point) bool {
	for _, m := range p.Runs {
		if m.Reference {
			return true
		}
	}
	return false
}

// findContenders lists the configurations without reference runs whose
// mean so far reaches within of the best objective and lies within edge of
// the SLO (or, for min_latency, of the rate) on the infeasible side.
func findContenders(surf *replay.Surface, within, edge float64) ([]search.Config, error) {
	_, bt, ok := surf.Best()
	if !ok {
		return nil, fmt.Errorf("refine: %s has no feasible configuration", surf.Name)
	}
	dir := surf.Objective().Direction()
	var out []search.Config
	for _, p := range surf.Points() {
		if hasReference(p) {
			continue // refined already
		}
		t, _ := surf.Truth(p.Config)
		if t.Failed || !(t.Value > 0) {
			continue
		}
		ratio := t.Value / bt.Value
		near := float64(t.P99) <= (1+edge)*float64(time.Duration(surf.SLO))
		if dir == search.Minimize {
			ratio = bt.Value / t.Value
			near = t.QPS >= (1-edge)*surf.Rate
		}
		if surf.Objective().Kind == objective.MaxCapacity {
			near = true // a capacity holds the SLO verdict already
		}
		if ratio >= within && near {
			out = append(out, p.Config)
		}
	}
	return out, nil
}

// simulateAll runs sim over configs on workers goroutines, the results in
// configs' order; the first error stops the rest.
func simulateAll(ctx context.Context, workers int, configs []search.Config, sim func(search.Config) ([]replay.Measurement, error)) ([][]replay.Measurement, error) {
	results := make([][]replay.Measurement, len(configs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := 0
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := firstErr != nil
				mu.Unlock()
				if stop || i >= len(configs) || ctx.Err() != nil {
					return
				}
				ms, err := sim(configs[i])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", configs[i], err)
					}
					mu.Unlock()
					return
				}
				results[i] = ms
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return results, ctx.Err()
}
