package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/gonum/optimize"

	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sim"
)

// fitCmd completes a host calibration with the serving costs and noise
// that make the simulation reproduce real stand-in runs (the calibration
// runs; validation uses others):
//
//   - ClientCPUus is the probe's own CPU per request, as it reported it;
//   - RequestCPUus, BatchCPUus, DelayUS and JobCV are fitted by
//     Nelder-Mead on their logs, minimising over the runs' configurations
//     the mean of the squared log ratios of simulated to real QPS (weight
//     2), P50, P99, cores used (server and probe) and mean batch size, plus
//     10 × the squared difference of error rates (each configuration
//     simulated with fixed seeds, so the objective is deterministic);
//   - RunSigma is the run-to-run spread of real QPS left over once the
//     simulation's own spread (jitter, job noise, finite duration) is
//     accounted for: sqrt(max(0, pooled var of log QPS over real repeats
//   - the same over simulated repeats with RunSigma 0)).
func fitCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fit", flag.ContinueOnError)
	calPath := fs.String("cal", "", "host calibration to complete (from surfacetool host)")
	out := fs.String("o", "", "calibration file to write")
	seeds := fs.Int("seeds", 2, "simulated repeats per configuration and evaluation")
	dur := fs.Duration("d", 6*time.Second, "simulated measurement per repeat while fitting")
	evals := fs.Int("evals", 160, "most objective evaluations")
	discipline := fs.String("discipline", "ps", "how the simulated cores are shared: ps (processor sharing) or rr (round robin)")
	quantum := fs.Duration("quantum", 10*time.Millisecond, "with -discipline rr: the longest a thread runs before it queues again")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *calPath == "" || *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("fit: -cal, -o and at least one real-runs file are required")
	}
	cal, runs, groups, err := loadInputs(*calPath, fs.Args())
	if err != nil {
		return err
	}
	if len(groups) < 3 {
		return fmt.Errorf("fit: %d configurations with valid runs; want at least 3", len(groups))
	}
	m, err := model.Load("configs/models/" + cal.Model)
	if err != nil {
		return err
	}
	cal.Scheduling = sim.Scheduling{Discipline: *discipline}
	if *discipline == "rr" {
		cal.Scheduling.QuantumUS = float64(*quantum) / float64(time.Microsecond)
	}
	if err := cal.Validate(); err != nil {
		return err
	}
	var client []float64
	for _, g := range groups {
		for _, r := range g.runs {
			client = append(client, r.ClientCPUPerReq)
		}
	}
	cal.Serving.ClientCPUus = mean(client)

	type real struct{ qps, p50, p99, cores, batch, errRate float64 }
	reals := make([]real, len(groups))
	for i, g := range groups {
		var q, p5, p9, c, b, e []float64
		for _, r := range g.runs {
			q = append(q, math.Log(r.QPS))
			p5 = append(p5, math.Log(r.P50us))
			p9 = append(p9, math.Log(r.P99us))
			c = append(c, math.Log(r.ServerCPUs/r.WindowS+r.ClientCPUUtil*float64(cal.Cores)))
			b = append(b, math.Log(r.MeanBatch))
			e = append(e, r.ErrorRate)
		}
		reals[i] = real{mean(q), mean(p5), mean(p9), mean(c), mean(b), mean(e)}
	}
	set := func(x []float64) {
		cal.Serving.RequestCPUus = math.Exp(x[0])
		cal.Serving.BatchCPUus = math.Exp(x[1])
		cal.Serving.DelayUS = math.Exp(x[2])
		cal.Noise.JobCV = math.Min(math.Exp(x[3]), 3)
	}
	var simErr error
	evaluated := 0
	objective := func(x []float64) float64 {
		set(x)
		cal.Noise.RunSigma = 0
		total := 0.0
		for i, g := range groups {
			s, err := simulate(ctx, m.Desc, cal, g.runs[0], *seeds, *dur)
			if err != nil {
				simErr = err
				return math.Inf(1)
			}
			dq := math.Log(max(s.qps, 1e-9)) - reals[i].qps
			d5 := math.Log(max(s.p50, 1)) - reals[i].p50
			d9 := math.Log(max(s.p99, 1)) - reals[i].p99
			dc := math.Log(max(s.cpu, 1e-3)) - reals[i].cores
			db := math.Log(max(s.batch, 1)) - reals[i].batch
			de := s.errRate - reals[i].errRate
			total += 2*dq*dq + d5*d5 + d9*d9 + dc*dc + db*db + 10*de*de
		}
		evaluated++
		v := total / float64(len(groups))
		if evaluated%10 == 0 {
			fmt.Printf("  eval %3d: request %.1fµs batch %.1fµs delay %.1fµs job_cv %.3f -> %.4f\n", evaluated,
				cal.Serving.RequestCPUus, cal.Serving.BatchCPUus, cal.Serving.DelayUS, cal.Noise.JobCV, v)
		}
		return v
	}
	start := []float64{math.Log(50), math.Log(50), math.Log(50), math.Log(0.3)}
	fmt.Printf("fitting %d configurations (%d runs), client CPU %.1fµs/request from the probe\n", len(groups), len(runs), cal.Serving.ClientCPUus)
	res, err := optimize.Minimize(optimize.Problem{Func: objective}, start,
		&optimize.Settings{FuncEvaluations: *evals, Converger: &optimize.FunctionConverge{Absolute: 1e-4, Iterations: 20}},
		&optimize.NelderMead{SimplexSize: 0.7})
	if simErr != nil {
		return simErr
	}
	if err != nil && res == nil {
		return err
	}
	set(res.X)
	fmt.Printf("fitted after %d evaluations (%s): request %.1fµs, batch %.1fµs, delay %.1fµs, job_cv %.3f; objective %.4f\n",
		res.FuncEvaluations, res.Status, cal.Serving.RequestCPUus, cal.Serving.BatchCPUus, cal.Serving.DelayUS, cal.Noise.JobCV, res.F)

	// Run-to-run spread: real repeats against simulated repeats.
	var realVar, simVar []float64
	for _, g := range groups {
		if len(g.runs) < 2 {
			continue
		}
		var q []float64
		for _, r := range g.runs {
			q = append(q, math.Log(r.QPS))
		}
		realVar = append(realVar, sd(q)*sd(q))
		s, err := simulate(ctx, m.Desc, cal, g.runs[0], 6, 10*time.Second)
		if err != nil {
			return err
		}
		simVar = append(simVar, s.qpsLogSD*s.qpsLogSD)
	}
	if len(realVar) > 0 {
		cal.Noise.RunSigma = math.Sqrt(max(0, mean(realVar)-mean(simVar)))
		fmt.Printf("run-to-run: real log-QPS sd %.4f over %d repeated configurations, simulated without drift %.4f: run_sigma %.4f\n",
			math.Sqrt(mean(realVar)), len(realVar), math.Sqrt(mean(simVar)), cal.Noise.RunSigma)
	}
	cal.Serving.Fit = fmt.Sprintf("surfacetool fit -seeds %d -d %s -evals %d -discipline %s -quantum %s on %s: %d configurations, %d runs; mean squared log error %.4f",
		*seeds, *dur, *evals, *discipline, *quantum, strings.Join(fs.Args(), " "), len(groups), len(runs), res.F)
	return writeCalibration(*out, cal)
}
