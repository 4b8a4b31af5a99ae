package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/verify"
)

// exitVerifyFailed is verify's status when the soak ran and the
// configuration failed it (README "Acceptance soak").
const exitVerifyFailed = 4

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "acceptance soak: hold a rate on the recommended configuration and check the SLO in every interval",
		UsageText: "batchtune verify [options] STUDY\n\n" +
			"   batchtune verify configs/examples/demo.yaml                 # the incumbent at capacity_low x 0.65, 5 minutes\n" +
			"   batchtune verify --rate 400 --duration 1m demo.yaml          # a given rate\n" +
			"   batchtune verify --config prod.config --flags=--tensorflow_intra_op_parallelism=4 --rate 400 demo.yaml",
		Description: "STUDY is a study file, or the name of a study in the store (its stored spec is\n" +
			"used; relative paths in it are read from the current directory).\n\n" +
			"Starts the study's server with the configuration to verify (default: the study's\n" +
			"latest accepted recommendation; --run N: that run's; --config and --flags: a\n" +
			"batching.config and server flags of your own), warms it up as the study says,\n" +
			"then holds an open-loop rate (default: the recommendation's capacity lower bound\n" +
			"x --headroom; without a measured capacity --rate is required) for --duration,\n" +
			"as one continuous run cut into --interval intervals, latency counted from each\n" +
			"request's intended send time. It passes only when the SLO's quantile (P99 by\n" +
			"default) is under slo.latency in every interval, the error rate over the soak is\n" +
			"under --max-error-rate and the rate was kept (seed 001 §6.2). A failure names\n" +
			"the likely cause from TF Serving's metrics. The result is stored beside the run.\n\n" +
			"Exit status: 0 passed, 4 failed, 1 not judged (the server did not start, or\n" +
			"the load generator was the limit), 2 usage.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "study", Aliases: []string{"s"}, Usage: "the study file or stored study name (or give it as the argument)"},
			dbFlag(),
			&cli.StringFlag{Name: "state-dir", Usage: "runtime state (the soak's files)", Value: filepath.Join(dataDir(), "runtime")},
			&cli.Uint64Flag{Name: "run", Usage: "verify this run's recommendation (default: the incumbent)"},
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "verify this batching.config instead of a recommendation"},
			&cli.StringSliceFlag{Name: "flags", Usage: "with --config: server flags, --name=value (repeatable)"},
			&cli.Float64Flag{Name: "rate", Aliases: []string{"r"}, Usage: "requests per second to hold (default: capacity_low x headroom)"},
			&cli.Float64Flag{Name: "headroom", Usage: "share of the capacity lower bound to hold", Value: capacity.DefaultHeadroom},
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Usage: "how long to hold the rate", Value: verify.DefaultDuration},
			&cli.DurationFlag{Name: "interval", Usage: "length of each judged interval (whole seconds)", Value: verify.DefaultInterval},
			&cli.Float64Flag{Name: "max-error-rate", Usage: "largest error rate over the soak (0.0001 is 0.01%)", Value: verify.DefaultMaxErrorRate},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log every step"},
		},
		Action: runVerify,
	}
}

func runVerify(c *cli.Context) error {
	arg := c.String("study")
	switch {
	case c.NArg() > 1:
		return usageErr(fmt.Errorf("verify: one study at most, got %d arguments", c.NArg()))
	case c.NArg() == 1 && arg != "" && arg != c.Args().First():
		return usageErr(fmt.Errorf("verify: the study is given twice (--study %s and argument %s): give one", arg, c.Args().First()))
	case c.NArg() == 1:
		arg = c.Args().First()
	case arg == "":
		return usageErr(errors.New("verify: name the study: batchtune verify STUDY.yaml (or a study name in the store)"))
	}
	if c.IsSet("flags") && c.String("config") == "" {
		return usageErr(errors.New("verify: --flags goes with --config (a recommendation carries its own flags)"))
	}
	if c.IsSet("run") && c.String("config") != "" {
		return usageErr(errors.New("verify: give --run or --config, not both"))
	}
	if h := c.Float64("headroom"); !(h > 0 && h <= 1) {
		return usageErr(fmt.Errorf("verify: --headroom must be in (0, 1], got %g", h))
	}
	if c.IsSet("rate") && !(c.Float64("rate") > 0) {
		return usageErr(fmt.Errorf("verify: --rate must be a positive number of requests per second, got %g", c.Float64("rate")))
	}
	o := verify.Options{
		Duration: c.Duration("duration"), Interval: c.Duration("interval"), MaxErrorRate: c.Float64("max-error-rate"),
		Rate: 1, Cores: goruntime.NumCPU(),
	}
	if err := o.Check(); err != nil {
		return usageErr(fmt.Errorf("verify: %w", err))
	}

	db, err := openStore(c.String("db"), "batchtune verify "+arg)
	if err != nil {
		return err
	}
	defer db.Close()
	study, err := verifyStudy(c, db, arg)
	if err != nil {
		return err
	}
	sub, rec, err := verifySubject(c, db, study)
	if err != nil {
		return err
	}
	o.Rate, o.RateSource, err = verifyRate(c, study, rec)
	if err != nil {
		return err
	}

	log, _, err := tuneLogger(os.Stderr, "", c.Bool("verbose"))
	if err != nil {
		return err
	}
	o.Logger = log
	rt, err := runtime.New(study.Target, runtime.Options{Study: study.Name, StateDir: c.String("state-dir"), Logger: log})
	if err != nil {
		return err
	}
	if cl, ok := rt.(io.Closer); ok {
		defer cl.Close()
	}
	if err := rt.Recover(c.Context); err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	fmt.Fprintf(os.Stderr, "verify: starting %s's server with %s; after the warmup, %.1f req/s for %s\n",
		study.Name, sub.Source, o.Rate, o.Duration)
	if tty := isTerminal(os.Stderr); tty && !c.Bool("verbose") {
		o.Progress = func(p probe.Progress) {
			if p.Phase == probe.PhaseMeasuring {
				fmt.Fprintf(os.Stderr, "\r\033[K%s of %s  %.0f req/s ok  %d errors  P99 so far %s", p.Elapsed.Round(time.Second), o.Duration, p.QPS, p.Errors, fmtDur(p.P99))
			}
		}
	}
	v, verr := verify.Run(c.Context, study, rt, sub, o)
	if o.Progress != nil {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	// The server is put back also after a signal cancelled the soak.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), 2*time.Minute)
	rerr := rt.Restore(rctx)
	cancel()
	if v == nil {
		return errors.Join(verr, rerr)
	}
	if _, err := db.Study(c.Context, study.Name); errors.Is(err, store.ErrNotFound) {
		if err := db.PutStudy(c.Context, &store.Study{Name: study.Name, SpecHash: study.Hash(), Spec: string(study.Source)}); err != nil {
			return err
		}
	}
	serr := db.AddVerification(c.Context, v)
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
	} else {
		printVerification(c.App.Writer, v)
		if serr == nil {
			fmt.Fprintf(c.App.Writer, "stored as verification %d of study %s\n", v.Seq, v.Study)
		}
	}
	if serr != nil {
		return fmt.Errorf("verify: the soak ran but was not stored: %w", serr)
	}
	if rerr != nil {
		return fmt.Errorf("runtime restore: %w", rerr)
	}
	switch v.Verdict {
	case store.VerifyPassed:
		return nil
	case store.VerifyFailed:
		return &statusError{code: exitVerifyFailed, err: fmt.Errorf("verify: %s failed the soak: %s", sub.Source, strings.Join(v.Failures, "; "))}
	}
	return fmt.Errorf("verify: not judged: %s", strings.Join(v.Failures, "; "))
}

// verifyStudy loads the study: a file, or the spec stored under that name.
func verifyStudy(c *cli.Context, db *store.DB, arg string) (*configs.Study, error) {
	_, statErr := os.Stat(arg)
	ext := filepath.Ext(arg)
	if !errors.Is(statErr, fs.ErrNotExist) || strings.ContainsRune(arg, filepath.Separator) || ext == ".yaml" || ext == ".yml" {
		return loadStudy(arg)
	}
	st, err := db.Study(c.Context, arg)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("verify: %s is neither a study file nor a study in %s", arg, db.Path())
	}
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	s, err := configs.ParseStudy(filepath.Join(wd, arg+" (stored spec)"), []byte(st.Spec))
	if err != nil {
		return nil, err
	}
	if err := s.Validate(studyChecks()...); err != nil {
		return nil, fmt.Errorf("the stored spec of study %s: %w", arg, err)
	}
	return s, nil
}

// verifySubject is what to verify: --config and --flags, the
// recommendation of --run, or the study's incumbent.
func verifySubject(c *cli.Context, db *store.DB, s *configs.Study) (verify.Subject, *store.Recommendation, error) {
	if path := c.String("config"); path != "" {
		data, err := configs.ReadFile(path, configs.MaxBatchingBytes)
		if err != nil {
			return verify.Subject{}, nil, fmt.Errorf("--config: %w", err)
		}
		if _, err := configs.LoadBatching(path); err != nil {
			return verify.Subject{}, nil, fmt.Errorf("--config: %w", err)
		}
		flags := c.StringSlice("flags")
		if _, err := verify.Launch(data, flags); err != nil {
			return verify.Subject{}, nil, usageErr(fmt.Errorf("--flags: %w", err))
		}
		return verify.Subject{Source: "--config " + path, Batching: data, Flags: flags}, nil, nil
	}
	recs, err := db.Recommendations(c.Context, s.Name)
	if errors.Is(err, store.ErrNotFound) {
		return verify.Subject{}, nil, fmt.Errorf("study %s has no runs in %s: tune it first, or verify a file with --config", s.Name, db.Path())
	}
	if err != nil {
		return verify.Subject{}, nil, err
	}
	var rec *store.Recommendation
	for i := len(recs) - 1; i >= 0 && rec == nil; i-- {
		if run := c.Uint64("run"); (run == 0 && recs[i].Accepted) || (run != 0 && recs[i].Run == run) {
			rec = &recs[i]
		}
	}
	if rec == nil {
		if run := c.Uint64("run"); run != 0 {
			return verify.Subject{}, nil, fmt.Errorf("run %d of study %s made no recommendation", run, s.Name)
		}
		return verify.Subject{}, nil, fmt.Errorf("study %s has no accepted recommendation yet: tune it first, or verify a file with --config", s.Name)
	}
	src := fmt.Sprintf("recommendation %d (run %d)", rec.Seq, rec.Run)
	return verify.Subject{Run: rec.Run, Recommendation: rec.Seq, Source: src, Batching: []byte(rec.Batching), Flags: rec.Flags}, rec, nil
}

// verifyRate is --rate, or the recommendation's capacity lower bound x
// --headroom.
func verifyRate(c *cli.Context, s *configs.Study, rec *store.Recommendation) (float64, string, error) {
	if c.IsSet("rate") {
		return c.Float64("rate"), "--rate", nil
	}
	if rec == nil {
		return 0, "", usageErr(errors.New("verify: --rate is required with --config: the capacity of a configuration of your own is not known"))
	}
	rate, src, err := verify.RateOf(rec, c.Float64("headroom"))
	switch {
	case errors.Is(err, capacity.ErrWideInterval):
		return 0, "", usageErr(fmt.Errorf("%w; --rate is required: give it, or re-run the study to confirm its capacity", err))
	case err != nil:
		return 0, "", usageErr(fmt.Errorf("%w (study %s's objective is %s); --rate is required: give it, or tune with objective: max_capacity", err, s.Name, s.Objective))
	}
	return rate, src, nil
}

// printVerification writes the soak's series and verdict.
func printVerification(w io.Writer, v *store.Verification) {
	q := v.Quantile
	if q == 0 {
		q = 0.99
	}
	qn := "P" + strconv.FormatFloat(100*q, 'g', -1, 64)
	fmt.Fprintf(w, "\nverify %s: %s at %.1f req/s (%s) for %s, %s intervals\n", v.Study, v.Source, v.Rate, v.RateSource, v.Duration, v.Interval)
	fmt.Fprintf(w, "pass: %s <= %s in every interval, error rate <= %.4g%%, rate kept\n\n", qn, fmtDur(v.SLO), 100*v.MaxErrorRate)
	if len(v.Intervals) > 0 {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "interval\tsent/s\tok/s\tP50\t%s\tmax\terrors\trejected\tmean batch\tqueueing\t\n", qn)
		for i, iv := range v.Intervals {
			mark := ""
			if iv.Over {
				mark = " <"
			}
			sent := 0.0
			if iv.Dur > 0 {
				sent = float64(iv.Sent) / iv.Dur.Seconds()
			}
			fmt.Fprintf(tw, "%d (%s-%s)\t%.1f\t%.1f\t%s\t%s%s\t%s\t%d\t%.0f\t%.1f\t%.0f%%\t\n", i+1,
				trimSecs(iv.Start), trimSecs(iv.Start+iv.Dur), sent, iv.Rate, fmtDur(iv.P50), fmtDur(iv.Quantile), mark,
				fmtDur(iv.Max), iv.Errors, iv.Rejected, iv.MeanBatch, 100*iv.QueueShare)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nwhole soak: %.1f req/s achieved of %.1f sent, P50 %s, P99 %s, error rate %.4g%% (%d of %d", v.Achieved, v.SentRate,
		fmtDur(v.P50), fmtDur(v.P99), 100*v.ErrorRate, v.Requests-v.OK+v.Unfinished, v.Requests+v.Unfinished)
	if v.Unfinished > 0 {
		fmt.Fprintf(w, ", %d never answered", v.Unfinished)
	}
	fmt.Fprintf(w, "), mean batch %.1f, queueing %.0f%%\n", v.MeanBatch, 100*v.QueueShare)
	if v.Note != "" {
		fmt.Fprintf(w, "note: %s\n", v.Note)
	}
	fmt.Fprintf(w, "\nverdict: %s\n", strings.ToUpper(v.Verdict))
	for _, f := range v.Failures {
		fmt.Fprintf(w, "  - %s\n", f)
	}
	if len(v.Causes) > 0 {
		fmt.Fprintln(w, "likely causes:")
		for _, c := range v.Causes {
			fmt.Fprintf(w, "  - %s: %s\n", c.Name, c.Detail)
		}
	}
}

func trimSecs(d time.Duration) string { return fmt.Sprintf("%gs", d.Seconds()) }
