package main

import (
	"context"
	"flag"
	"fmt"
	"os"
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
	_, bt, ok := surf.Best()
	if !ok {
		return fmt.Errorf("refine: %s has no feasible configuration", *path)
	}
	dir := surf.Objective().Direction()
	var contenders []search.Config
	for _, p := range surf.Points() {
		if hasReference(p) {
			continue // refined already
		}
		t, _ := surf.Truth(p.Config)
		if t.Failed || !(t.Value > 0) {
			continue
		}
		ratio := t.Value / bt.Value
		near := float64(t.P99) <= (1+*edge)*float64(time.Duration(surf.SLO))
		if dir == search.Minimize {
			ratio = bt.Value / t.Value
			near = t.QPS >= (1-*edge)*surf.Rate
		}
		if surf.Objective().Kind == objective.MaxCapacity {
			near = true // a capacity holds the SLO verdict already
		}
		if ratio >= *within && near {
			contenders = append(contenders, p.Config)
		}
	}
	started := time.Now()
	fmt.Printf("%s: %d contenders, %d reference runs each\n", surf.Name, len(contenders), *runs)
	results := make([][]replay.Measurement, len(contenders))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := 0
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(contenders) || ctx.Err() != nil {
					return
				}
				ms, err := simulateConfig(ctx, sp, m.Desc, cal, surf.Space(), contenders[i], 1000, *runs)
				if err != nil {
					mu.Lock()
					firstErr = fmt.Errorf("%s: %w", contenders[i], err)
					mu.Unlock()
					return
				}
				for j := range ms {
					ms[j].Reference = true
				}
				results[i] = ms
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, ms := range results {
		for _, m := range ms {
			if err := surf.Add(m); err != nil {
				return err
			}
		}
	}
	tmp := *path + ".tmp"
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
	if err := os.Rename(tmp, *path); err != nil {
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
