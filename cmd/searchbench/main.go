// Command searchbench compares search strategies on recorded performance
// surfaces: every strategy runs over many seeds against each surface (a
// replay answers each suggested configuration with one of its recorded
// measurements), and a table per surface shows how many trials each needed
// to come within 95% and 99% of the best truly feasible objective, and how
// often its pick after the trial budget was truly feasible.
//
//	searchbench [flags] SURFACE.jsonl...
//	searchbench -compare OLD.json NEW.json
//	searchbench -truth name=value,... SURFACE.jsonl...
//	searchbench -strategies S -trace K -budget N -horizon N SURFACE.jsonl...
//
// -compare reads two -json outputs back (two settings, or two strategies)
// and says, per surface and target, whether the new side needs
// significantly fewer or more trials over the seeds (Mann-Whitney), and
// how many of those verdicts survive Holm's correction for the number of
// comparisons made; then, per surface, whether its picks after the budget
// are worth significantly more or less (the truth's share of the best,
// none for a truly infeasible pick), with Holm's correction over the
// surfaces; with -confirm on both sides, the same for the confirmation
// stage's winners. -confirm runs the tuner's confirmation stage (package
// internal/confirm, the default study's settings) after the budget: what a
// user of the tuner is handed. -truth prints a configuration's truth on a surface
// (the mean of its recorded runs, what strategies are scored against) and
// its share of the surface's best. -trace K prints one strategy's run with
// seed K trial by trial, through the same loop the table is scored by.
//
// The surface file format is documented in package search/replay. The
// command is thin: search/replay does the work and returns data; this file
// parses flags, handles signals and prints.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/search/replay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// listFlag collects a repeatable flag's values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, " ") }

func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// settingsFlag collects -set strategy.key=value.
type settingsFlag map[string]map[string]string

func (s settingsFlag) String() string { return "" }

func (s settingsFlag) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	strat, name, ok2 := strings.Cut(key, ".")
	if !ok || !ok2 || strat == "" || name == "" {
		return fmt.Errorf("want strategy.setting=value (e.g. bayes.init=6), got %q", v)
	}
	if s[strat] == nil {
		s[strat] = map[string]string{}
	}
	s[strat][name] = val
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("searchbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	strategies := fs.String("strategies", strings.Join(search.Names(), ","), "strategies to compare, comma-separated")
	seeds := fs.Int("seeds", 30, "seeds per strategy and surface")
	budget := fs.Int("budget", 0, "trial budget after which the pick is judged (0: 50, or the runnable count if smaller)")
	horizon := fs.Int("horizon", 0, "most trials a run may take to reach the targets (0: 400, or the runnable count if smaller)")
	batch := fs.Int("batch", 1, "suggestions per call (parallel trials)")
	targets := fs.String("targets", "0.95,0.99", "fractions of the best feasible objective to report trials-to-reach for")
	earlyStop := fs.Bool("early-stop", false, "replay a run over the SLO's latency or error budget as the tuner's probe ends it, early-stopped (its figures kept, infeasible), instead of as a completed infeasible trial")
	confirmStage := fs.Bool("confirm", false, "also run the tuner's confirmation stage after the budget, with the default study's confirmation settings (or -confirmation's), and report its winner's truth (what a user is handed)")
	confirmation := fs.String("confirmation", "", "with -confirm, the study's confirmation settings to run it with instead of the default's, e.g. repeats=5,max_repeats=8 (keys top_k, repeats, max_repeats, clean_repeats, confidence)")
	resolution := fs.Bool("resolution", false, "add a target per surface at 1 - one measurement's coefficient of variation among its best configurations (the finest a single trial resolves)")
	ci := fs.Bool("ci", false, "write each median with its distribution-free 95% confidence interval over seeds")
	workers := fs.Int("workers", 0, "runs in parallel (0: GOMAXPROCS)")
	asJSON := fs.Bool("json", false, "write the reports as JSON instead of tables")
	compare := fs.Bool("compare", false, "compare -json outputs instead of running: OLD.json NEW.json, or OLD.json... -- NEW.json... (each FILE or FILE:STRATEGY); per surface and target, each side's median trials with its 95% interval, the Mann-Whitney p over seeds, its Holm adjustment over all the comparisons, and won/lost at p < 0.05; then the same for what each side's picks after the budget are worth")
	verbose := fs.Bool("v", false, "log every finished run to stderr")
	trace := fs.Uint64("trace", 0, "instead of the table, print every trial of seed K's run (one strategy): what was suggested and why, what it measured, and its truth's share of the best (runs seeds 1..K; bound the run with -budget and -horizon)")
	var truths listFlag
	fs.Var(&truths, "truth", "instead of running, print a configuration's truth on each surface and its share of the best, e.g. -truth max_batch_size=32,batch_timeout_micros=20000,... (repeatable)")
	settings := settingsFlag{}
	fs.Var(settings, "set", "a strategy setting, strategy.name=value (repeatable), e.g. -set bayes.init=6")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: searchbench [flags] SURFACE.jsonl...\n       searchbench -compare OLD.json NEW.json\n\nCompares search strategies on recorded surfaces (format: package search/replay).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *compare {
		return runCompare(fs.Args(), stdout, stderr)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "searchbench: name at least one surface file")
		fs.Usage()
		return 2
	}
	if len(truths) > 0 {
		return runTruth(fs.Args(), truths, stdout, stderr)
	}
	ts, err := parseTargets(*targets)
	if err != nil {
		fmt.Fprintln(stderr, "searchbench: -targets:", err)
		return 2
	}
	var strats []search.Strategy
	names := strings.Split(*strategies, ",")
	for _, name := range names {
		st, err := search.New(strings.TrimSpace(name), settings[strings.TrimSpace(name)])
		if err != nil {
			fmt.Fprintf(stderr, "searchbench: strategy %s: %v\n", name, err)
			return 2
		}
		strats = append(strats, st)
	}
	for strat := range settings {
		if !slices.Contains(names, strat) {
			fmt.Fprintf(stderr, "searchbench: -set names strategy %q, which is not in -strategies\n", strat)
			return 2
		}
	}

	if *trace > 0 {
		if len(strats) != 1 {
			fmt.Fprintln(stderr, "searchbench: -trace: name one strategy in -strategies")
			return 2
		}
		*seeds = int(*trace)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	conf, err := parseConfirmation(*confirmation)
	if err != nil {
		fmt.Fprintln(stderr, "searchbench: -confirmation:", err)
		return 2
	}
	if *confirmation != "" && !*confirmStage {
		fmt.Fprintln(stderr, "searchbench: -confirmation needs -confirm")
		return 2
	}
	var reports []*replay.Report
	for i, path := range fs.Args() {
		s, err := replay.Load(path)
		if err != nil {
			fmt.Fprintln(stderr, "searchbench:", err)
			return 1
		}
		opts := replay.BenchOptions{
			Strategies: strats, Seeds: *seeds, Budget: *budget, Horizon: *horizon,
			Batch: *batch, Targets: ts, Resolution: *resolution, CI: *ci, Workers: *workers, Logger: logger,
			EarlyStop: *earlyStop,
		}
		if *confirmStage {
			opts.Confirm = &conf
		}
		var steps strings.Builder
		if *trace > 0 {
			// Only seed K's run writes, and it runs on one goroutine.
			opts.Trace = func(st replay.TraceStep) {
				if st.Seed == *trace {
					writeStep(&steps, st)
				}
			}
		}
		rep, err := replay.Bench(ctx, s, opts)
		if err != nil {
			fmt.Fprintf(stderr, "searchbench: %s: %v\n", path, err)
			return 1
		}
		if *trace > 0 {
			fmt.Fprintf(stdout, "%s, %s, seed %d:\n%s", s.Name, strats[0], *trace, steps.String())
			continue
		}
		reports = append(reports, rep)
		if *asJSON {
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := rep.WriteTable(stdout); err != nil {
			fmt.Fprintln(stderr, "searchbench:", err)
			return 1
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(jsonReports(reports)); err != nil {
			fmt.Fprintln(stderr, "searchbench:", err)
			return 1
		}
	}
	return 0
}

// writeStep writes one traced trial: its number, configuration, what it
// measured (and whether it met the SLO), its truth's share of the best and
// whether the truth meets the SLO, and the strategy's reason.
func writeStep(w *strings.Builder, st replay.TraceStep) {
	measured := "failed to load"
	if st.Trial.Measured {
		measured = fmt.Sprintf("measured %.4g (feasible %v)", st.Trial.Value, st.Trial.Feasible)
	}
	fmt.Fprintf(w, "%3d  %s  %s; truth %.3f of the best (feasible %v); %s\n", st.N, st.Trial.Config, measured, st.Ratio, st.Truth.Feasible, st.Reason)
}

// parseConfirmation reads -confirmation: the default study's
// confirmation settings with the named keys changed, checked as a study
// file's are (configs.Confirmation.Problems).
func parseConfirmation(text string) (configs.Confirmation, error) {
	c := configs.DefaultStudy().Confirmation
	if text == "" {
		return c, nil
	}
	for _, kv := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return c, fmt.Errorf("want key=value, got %q", kv)
		}
		var err error
		switch k {
		case "top_k":
			c.TopK, err = strconv.Atoi(v)
		case "repeats":
			c.Repeats, err = strconv.Atoi(v)
		case "max_repeats":
			c.MaxRepeats, err = strconv.Atoi(v)
		case "clean_repeats":
			c.CleanRepeats, err = strconv.Atoi(v)
		case "confidence":
			c.Confidence, err = strconv.ParseFloat(v, 64)
		default:
			return c, fmt.Errorf("unknown key %q (want top_k, repeats, max_repeats, clean_repeats or confidence)", k)
		}
		if err != nil {
			return c, fmt.Errorf("%s: not a number: %q", k, v)
		}
	}
	return c, c.Problems().Err()
}

func parseTargets(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0 && v <= 1) {
			return nil, fmt.Errorf("want fractions in (0, 1], got %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// jsonRow is one strategy's row of a report as -json writes it.
type jsonRow struct {
	Strategy string     `json:"strategy"`
	Median   []*float64 `json:"median"`
	P90      []*float64 `json:"p90"`
	// MedianCI is each median's 95% confidence interval over seeds
	// (null bounds: none at this many seeds, or beyond the horizon).
	MedianCI      [][2]*float64 `json:"median_ci"`
	Reached       []int         `json:"reached"`
	PickFeasible  float64       `json:"pick_feasible"`
	PickRatio     float64       `json:"pick_ratio"`
	StopMedian    *float64      `json:"stop_median"`
	StopPickRatio float64       `json:"stop_pick_ratio"`
	// The confirmation stage's winner (-confirm; absent without it).
	Confirmed     *jsonConfirmed `json:"confirmed,omitempty"`
	SuggestMeanMS float64        `json:"suggest_mean_ms"`
	Runs          []replay.Run   `json:"runs"`
}

// jsonConfirmed is a row's confirmation stage (replay.Row's Confirmed
// figures), as -json writes it.
type jsonConfirmed struct {
	Feasible float64 `json:"feasible"`
	Ratio    float64 `json:"ratio"`
	None     float64 `json:"none"`
	Repeats  float64 `json:"repeats"`
}

// jsonReport is one surface's report as -json writes it (and -compare
// reads it back).
type jsonReport struct {
	Surface   string    `json:"surface"`
	Objective string    `json:"objective"`
	SLO       string    `json:"slo"`
	Runnable  int       `json:"runnable"`
	Feasible  int       `json:"feasible"`
	Best      string    `json:"best"`
	BestValue float64   `json:"best_value"`
	Seeds     int       `json:"seeds"`
	Budget    int       `json:"budget"`
	Horizon   int       `json:"horizon"`
	Batch     int       `json:"batch"`
	Targets   []float64 `json:"targets"`
	// Resolution is one run's coefficient of variation among the
	// surface's best configurations.
	Resolution float64 `json:"resolution"`
	Within     []int   `json:"within"`
	// Confirm is the confirmation stage's settings when it ran (-confirm).
	Confirm *configs.Confirmation `json:"confirm,omitempty"`
	// EarlyStop: runs over the SLO were replayed as early-stopped
	// (-early-stop).
	EarlyStop bool      `json:"early_stop,omitempty"`
	Rows      []jsonRow `json:"rows"`
}

// jsonReports drops the per-run detail's unencodable infinities: an
// unreached target is written as null.
func jsonReports(reps []*replay.Report) []jsonReport {
	finite := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	var out []jsonReport
	for _, r := range reps {
		rep := jsonReport{
			Surface: r.Surface, Objective: r.Objective.Kind.String(), SLO: r.SLO.String(),
			Runnable: r.Runnable, Feasible: r.Feasible, Best: r.Best.String(), BestValue: r.BestTruth.Value,
			Seeds: r.Seeds, Budget: r.Budget, Horizon: r.Horizon, Batch: r.Batch, Targets: r.Targets,
			Resolution: r.Resolution, Within: r.Within, Confirm: r.Confirm, EarlyStop: r.EarlyStop,
		}
		for _, rw := range r.Rows {
			x := jsonRow{Strategy: rw.Strategy, Reached: rw.Reached, PickFeasible: rw.PickFeasible, PickRatio: rw.PickRatio,
				StopMedian: finite(rw.StopMedian), StopPickRatio: rw.StopPickRatio,
				SuggestMeanMS: float64(rw.SuggestMean.Microseconds()) / 1000, Runs: rw.Runs}
			if r.Confirm != nil {
				x.Confirmed = &jsonConfirmed{Feasible: rw.ConfirmedFeasible, Ratio: rw.ConfirmedRatio, None: rw.ConfirmedNone, Repeats: rw.ConfirmRepeats}
			}
			for i := range rw.Median {
				x.Median = append(x.Median, finite(rw.Median[i]))
				x.P90 = append(x.P90, finite(rw.P90[i]))
				if i < len(rw.MedianCI) {
					x.MedianCI = append(x.MedianCI, [2]*float64{finite(rw.MedianCI[i][0]), finite(rw.MedianCI[i][1])})
				}
			}
			rep.Rows = append(rep.Rows, x)
		}
		out = append(out, rep)
	}
	return out
}
