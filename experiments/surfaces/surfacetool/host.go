package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sim"
)

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("want integers separated by commas, got %q", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// hostCmd measures a model's host work and writes a calibration holding
// it (serving costs and noise still zero: fit adds them).
func hostCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("host", flag.ContinueOnError)
	dir := fs.String("model", "", "model base path (configs/models/NAME)")
	out := fs.String("o", "", "calibration file to write")
	rows := fs.String("rows", "1,2,4,8,16,32,64,128,256,512", "batch sizes")
	intra := fs.String("intra", "1,2,4,8", "intra-op thread counts")
	cont := fs.String("contention", "2,4", "simultaneous executions to measure besides one")
	minTime := fs.Duration("min-time", 300*time.Millisecond, "shortest time per cell and pass (in 5 blocks, the fastest kept)")
	passes := fs.Int("passes", 3, "passes over the grid; each cell keeps its fastest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return fmt.Errorf("host: -model and -o are required")
	}
	m, err := model.Load(*dir)
	if err != nil {
		return err
	}
	var o sim.HostOptions
	if o.Rows, err = intList(*rows); err != nil {
		return fmt.Errorf("-rows: %w", err)
	}
	if o.Intra, err = intList(*intra); err != nil {
		return fmt.Errorf("-intra: %w", err)
	}
	o.Contention = []int{}
	if *cont != "" {
		if o.Contention, err = intList(*cont); err != nil {
			return fmt.Errorf("-contention: %w", err)
		}
	}
	o.MinTime = *minTime
	o.Passes = *passes
	o.Logger = slog.New(slog.NewTextHandler(os.Stdout, nil))
	before := loadAverage()
	name := filepath.Base(filepath.Clean(*dir))
	cal, err := sim.MeasureHost(ctx, name, m.Desc, o)
	if err != nil {
		return err
	}
	cal.Source = fmt.Sprintf("surfacetool host -model %s -rows %s -intra %s -contention %s -min-time %s -passes %d; %s; load average %s before, %s after",
		*dir, *rows, *intra, *cont, *minTime, *passes, time.Now().UTC().Format("2006-01-02T15:04Z"), before, loadAverage())
	if err := writeCalibration(*out, cal); err != nil {
		return err
	}
	printHost(cal)
	return nil
}

// printHost prints the host curves and the contention check: k
// executions at once as measured and as processor sharing predicts them
// from single executions.
func printHost(cal *sim.Calibration) {
	fmt.Printf("\nhost work per batch, one execution at a time (%s, %d cores)\n", cal.Model, cal.Cores)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "intra\trows\tmain CPU µs\tmain wall µs\tparallelism\tafter CPU µs\tCV\t")
	for _, h := range cal.Host {
		for _, p := range h.Points {
			fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%.2f\t%.1f\t%.2f\t\n", h.Intra, p.Rows, p.MainCPUus, p.MainWallUS, p.MainCPUus/p.MainWallUS, p.AfterCPUus, p.CV)
		}
	}
	tw.Flush()
	checks := cal.CheckContention()
	if len(checks) == 0 {
		return
	}
	fmt.Printf("\nk executions at once (the whole host work, main + after): measured wall per execution vs processor sharing's prediction\n")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "intra\trows\tk\tmeasured µs\tpredicted µs\tpredicted/measured\t")
	var logs []float64
	for _, c := range checks {
		r := c.PredictedUS / c.WallUS
		logs = append(logs, math.Log(r))
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.1f\t%.2f\t\n", c.Intra, c.Rows, c.K, c.WallUS, c.PredictedUS, r)
	}
	tw.Flush()
	fmt.Printf("predicted/measured: geometric mean %.3f, geometric sd %.3f over %d samples\n", math.Exp(mean(logs)), math.Exp(sd(logs)), len(logs))
}
