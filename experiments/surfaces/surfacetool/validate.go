package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sim"
)

// readRuns reads realRun lines from files.
// loadInputs reads what fit and validate start from: a calibration and
// real runs, the runs also grouped by configuration.
func loadInputs(calPath string, runPaths []string) (*sim.Calibration, []realRun, []group, error) {
	cal, err := sim.LoadCalibration(calPath)
	if err != nil {
		return nil, nil, nil, err
	}
	runs, err := readRuns(runPaths)
	if err != nil {
		return nil, nil, nil, err
	}
	return cal, runs, groupRuns(runs), nil
}

// writeCalibration writes cal to path as JSON.
func writeCalibration(path string, cal *sim.Calibration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := cal.Encode(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readRuns(paths []string) ([]realRun, error) {
	var out []realRun
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<16), 1<<22)
		line := 0
		for sc.Scan() {
			line++
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			var r realRun
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %w", p, line, err)
			}
			out = append(out, r)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// group is the real runs of one configuration under one load.
type group struct {
	key  string
	runs []realRun
}

func groupRuns(runs []realRun) []group {
	var out []group
	idx := map[string]int{}
	for _, r := range runs {
		if r.LoadFailed || !r.Valid {
			continue
		}
		k := fmt.Sprintf("%s|%s|c=%d|r=%g|g=%d", r.Model, r.Config, r.Concurrency, r.Rate, r.GRPCMaxThreads)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, group{key: k})
		}
		out[i].runs = append(out[i].runs, r)
	}
	return out
}

// simulated is a configuration's simulated figures, means over seeds.
type simulated struct {
	qps, p50, p99, errRate, batch, cpu float64
	qpsLogSD                           float64
}

func simulate(ctx context.Context, desc model.Description, cal *sim.Calibration, r realRun, seeds int, dur time.Duration) (simulated, error) {
	var s simulated
	var logs []float64
	for seed := range seeds {
		res, err := sim.Run(ctx, sim.Trial{
			Model: desc, Batching: r.Config.batching(), IntraOp: r.Config.Intra, InterOp: r.Config.Inter,
			GRPCMaxThreads: r.GRPCMaxThreads, Load: sim.Load{Concurrency: r.Concurrency, Rate: r.Rate},
			Duration: dur, Calibration: cal, Seed: uint64(seed + 1),
		})
		if err != nil {
			return s, err
		}
		if res.LoadFailed {
			return s, fmt.Errorf("%s: simulated load failed: %s", r.Config, res.Reason)
		}
		s.qps += res.QPS
		s.p50 += float64(res.Latency.P50.Microseconds())
		s.p99 += float64(res.Latency.P99.Microseconds())
		s.errRate += res.ErrorRate
		s.batch += res.MeanBatch
		s.cpu += res.CPUUtil * float64(cal.Cores)
		logs = append(logs, math.Log(max(res.QPS, 1e-9)))
	}
	n := float64(seeds)
	s.qps, s.p50, s.p99, s.errRate, s.batch, s.cpu = s.qps/n, s.p50/n, s.p99/n, s.errRate/n, s.batch/n, s.cpu/n
	s.qpsLogSD = sd(logs)
	return s, nil
}

func sd(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := 0.0
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	ss := 0.0
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(v)-1))
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// validateCmd simulates every configuration of real runs and prints the
// agreement: per configuration, the real mean and the simulated mean of
// QPS, P99 and error rate, and their ratios; then the geometric mean and
// spread of the ratios.
func validateCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	calPath := fs.String("cal", "", "calibration file")
	seeds := fs.Int("seeds", 5, "simulated repeats per configuration")
	dur := fs.Duration("d", 10*time.Second, "simulated measurement per repeat")
	modelDir := fs.String("model", "", "the real runs' model directory when it is not configs/models/NAME; its host code must be the calibration's (an experiment model that shares a bundled model's signature and preprocessing)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *calPath == "" || fs.NArg() == 0 {
		return fmt.Errorf("validate: -cal and at least one real-runs file are required")
	}
	cal, _, groups, err := loadInputs(*calPath, fs.Args())
	if err != nil {
		return err
	}
	if len(groups) == 0 {
		return fmt.Errorf("validate: no valid real runs")
	}
	descs := map[string]model.Description{}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tload\tn\treal QPS\tsim QPS\tratio\treal P99 ms\tsim P99 ms\tratio\treal err\tsim err\treal batch\tsim batch\treal P50 ms\tsim P50 ms\treal cores\tsim cores\t")
	var qr, pr []float64
	errAgree, errTotal := 0, 0
	for _, g := range groups {
		r0 := g.runs[0]
		desc, ok := descs[r0.Model]
		if !ok {
			dir := "configs/models/" + r0.Model
			if *modelDir != "" {
				dir = *modelDir
			}
			m, err := model.Load(dir)
			if err != nil {
				return err
			}
			desc = m.Desc
			descs[r0.Model] = desc
		}
		if r0.Model != cal.Model && *modelDir == "" {
			return fmt.Errorf("validate: real runs of %s against a calibration of %s", r0.Model, cal.Model)
		}
		var q, p, e, b, p5, cores []float64
		for _, r := range g.runs {
			q = append(q, r.QPS)
			p = append(p, r.P99us)
			e = append(e, r.ErrorRate)
			b = append(b, r.MeanBatch)
			p5 = append(p5, r.P50us)
			cores = append(cores, r.ServerCPUs/r.WindowS+r.ClientCPUUtil*float64(cal.Cores))
		}
		s, err := simulate(ctx, desc, cal, r0, *seeds, *dur)
		if err != nil {
			return err
		}
		rq, rp := s.qps/mean(q), s.p99/mean(p)
		qr = append(qr, math.Log(rq))
		pr = append(pr, math.Log(rp))
		// Error rates agree when both are within the same budget class.
		errTotal++
		if (mean(e) > 0.01) == (s.errRate > 0.01) {
			errAgree++
		}
		load := fmt.Sprintf("c=%d", r0.Concurrency)
		if r0.Rate > 0 {
			load = fmt.Sprintf("r=%g", r0.Rate)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.4f\t%.4f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
			r0.Config, load, len(g.runs), mean(q), s.qps, rq, mean(p)/1e3, s.p99/1e3, rp, mean(e), s.errRate, mean(b), s.batch,
			mean(p5)/1e3, s.p50/1e3, mean(cores), s.cpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	gm := func(v []float64) float64 { return math.Exp(mean(v)) }
	absMax := func(v []float64) float64 {
		m := 0.0
		for _, x := range v {
			m = max(m, math.Abs(x))
		}
		return math.Exp(m)
	}
	within := func(v []float64, f float64) int {
		n := 0
		for _, x := range v {
			if math.Abs(x) <= math.Log(f) {
				n++
			}
		}
		return n
	}
	slices.Sort(qr)
	fmt.Printf("\n%d configurations. QPS sim/real: geometric mean %.3f, worst factor %.2f, within ±10%%: %d, within ±25%%: %d\n",
		len(qr), gm(qr), absMax(qr), within(qr, 1.10), within(qr, 1.25))
	fmt.Printf("P99 sim/real: geometric mean %.3f, worst factor %.2f, within ±25%%: %d, within ±50%%: %d\n",
		gm(pr), absMax(pr), within(pr, 1.25), within(pr, 1.5))
	fmt.Printf("error rate on the same side of 1%%: %d of %d\n", errAgree, errTotal)
	return nil
}
