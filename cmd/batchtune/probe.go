package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/tfserving"
)

func probeCommand() *cli.Command {
	return &cli.Command{
		Name:  "probe",
		Usage: "measure one TF Serving model under a fixed load",
		UsageText: "batchtune probe --target HOST:PORT --model NAME [--concurrency C | --rate R] [options]\n\n" +
			"   batchtune probe --target 127.0.0.1:8500 --rest 127.0.0.1:8501 --model ranker --concurrency 64\n" +
			"   batchtune probe --target 127.0.0.1:8500 --model ranker --rate 500 --slo-latency 50ms --json",
		Description: "Waits until the model is AVAILABLE, warms it up until latency settles, then\n" +
			"measures it under a closed-loop (--concurrency) or open-loop (--rate) load until\n" +
			"throughput and P99 are statistically stable (or --max-duration), and prints a\n" +
			"summary: latency from the intended send time (corrected for coordinated\n" +
			"omission) beside service time, throughput, errors by gRPC code, the generator's\n" +
			"own CPU and pacing, and TF Serving's batching metrics when --rest is given.\n" +
			"The payload is generated from the model's signature unless --input,\n" +
			"--request-file or --warmup-file says otherwise.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "target", Usage: "gRPC address HOST:PORT (TF Serving's --port)"},
			&cli.StringFlag{Name: "rest", Usage: "REST address HOST:PORT (--rest_api_port): metrics, REST transport"},
			&cli.StringFlag{Name: "model", Usage: "model name"},
			&cli.Int64Flag{Name: "version", Usage: "model version (default: the server's latest)"},
			&cli.StringFlag{Name: "signature", Usage: "signature name (default serving_default)"},

			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Usage: "closed loop: requests kept in flight (default 8 when no --rate)"},
			&cli.Float64Flag{Name: "rate", Aliases: []string{"r"}, Usage: "open loop: requests per second, latency counted from the intended send"},
			&cli.BoolFlag{Name: "poisson", Usage: "open loop: Poisson arrivals instead of even spacing"},
			&cli.IntFlag{Name: "max-workers", Usage: "open loop: most requests in flight", Value: probe.DefaultMaxWorkers},
			&cli.IntFlag{Name: "connections", Usage: "gRPC connections", Value: probe.DefaultConnections},
			&cli.StringFlag{Name: "transport", Usage: "grpc (lean client), grpc-lib (grpc-go's client) or rest", Value: string(probe.GRPC)},
			&cli.DurationFlag{Name: "request-timeout", Usage: "deadline of each request (0: none)"},

			&cli.GenericFlag{Name: "input", Value: &inputFlags{}, Usage: "generated input NAME:DTYPE:SHAPE, e.g. features:float32:-1,256 (-1 first = batch); repeatable"},
			&cli.IntFlag{Name: "batch", Usage: "rows per generated request", Value: 1},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of generated values and Poisson arrivals"},
			&cli.StringFlag{Name: "request-file", Usage: "payload: a PredictRequest in protobuf JSON"},
			&cli.StringFlag{Name: "warmup-file", Usage: "payload: a TF Serving warmup file (assets.extra/tf_serving_warmup_requests)"},

			&cli.DurationFlag{Name: "ready-timeout", Usage: "how long to wait for the model to be AVAILABLE (0: do not wait)", Value: time.Minute},
			&cli.Int64Flag{Name: "warmup-requests", Usage: "warm up with at least this many requests (0: until latency settles)"},
			&cli.BoolFlag{Name: "warmup-until-settled", Usage: "after --warmup-requests, also wait for latency to settle"},
			&cli.DurationFlag{Name: "warmup-max", Usage: "longest warmup", Value: 30 * time.Second},
			&cli.BoolFlag{Name: "no-warmup", Usage: "measure from the first request (cold start included)"},

			&cli.DurationFlag{Name: "min-duration", Usage: "shortest measurement", Value: 5 * time.Second},
			&cli.DurationFlag{Name: "max-duration", Usage: "longest measurement", Value: 60 * time.Second},
			&cli.DurationFlag{Name: "window", Usage: "stability window (whole seconds)", Value: time.Second},
			&cli.Float64Flag{Name: "throughput-tolerance", Usage: "stable when the 95% interval of throughput is within ± this share", Value: 0.03},
			&cli.Float64Flag{Name: "p99-tolerance", Usage: "stable when the P99 intervals are within ± this share", Value: 0.10},
			&cli.DurationFlag{Name: "slo-latency", Usage: "stop early once this latency target is certainly broken"},
			&cli.Float64Flag{Name: "slo-quantile", Usage: "quantile held to --slo-latency", Value: 0.99},
			&cli.Float64Flag{Name: "error-rate", Usage: "with an SLO: the error-rate budget (share of requests)", Value: 0.001},
			&cli.DurationFlag{Name: "max-pacing-lag", Usage: "open loop: P99 send lag beyond which the result is invalid (default: max(10ms, slo-latency/10))"},

			&cli.StringFlag{Name: "metrics-path", Usage: "Prometheus path on the REST port", Value: probe.DefaultMetricsPath},
			&cli.StringFlag{Name: "metrics-url", Usage: "full metrics URL (overrides --rest + --metrics-path)"},
			&cli.BoolFlag{Name: "no-metrics", Usage: "do not scrape the server's metrics"},

			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.BoolFlag{Name: "series", Usage: "also print the per-second series"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
		},
		Action: runProbe,
	}
}

// probeSetup is everything runProbe needs, decoded from flags.
type probeSetup struct {
	target  probe.Target
	opts    probe.Options
	load    probe.Load
	measure probe.MeasureOptions
	warmup  *probe.WarmupOptions // nil: no warmup
	ready   time.Duration
}

func probeFlags(c *cli.Context) (*probeSetup, error) {
	if c.NArg() > 0 {
		return nil, fmt.Errorf("probe: unexpected argument %q (everything is a flag; see --help)", c.Args().First())
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	s := &probeSetup{
		target: probe.Target{Addr: c.String("target"), RESTAddr: c.String("rest"), Model: c.String("model"),
			Version: c.Int64("version"), Signature: c.String("signature")},
		ready: c.Duration("ready-timeout"),
	}
	transport := probe.Transport(c.String("transport"))
	switch transport {
	case probe.GRPC, probe.GRPCLib:
		if s.target.Addr == "" {
			bad("--target HOST:PORT is required")
		}
	case probe.REST:
		if s.target.RESTAddr == "" {
			bad("--transport rest needs --rest HOST:PORT")
		}
	default:
		bad("--transport %q: want grpc, grpc-lib or rest", transport)
	}
	if s.target.Model == "" {
		bad("--model NAME is required")
	}
	if c.IsSet("concurrency") && c.IsSet("rate") {
		bad("give --concurrency (closed loop) or --rate (open loop), not both")
	}
	s.load = probe.Load{Concurrency: c.Int("concurrency"), Rate: c.Float64("rate"), Poisson: c.Bool("poisson"),
		Seed: c.Uint64("seed"), MaxWorkers: c.Int("max-workers")}
	if !c.IsSet("concurrency") && !c.IsSet("rate") {
		s.load.Concurrency = 8
	}
	if c.IsSet("concurrency") {
		inRange(bad, "--concurrency", s.load.Concurrency, 1, configs.MaxConcurrency)
	}
	inRange(bad, "--max-workers", c.Int("max-workers"), 1, configs.MaxConcurrency)
	inRange(bad, "--connections", c.Int("connections"), 1, configs.MaxConnections)
	inRange(bad, "--batch", c.Int("batch"), 1, configs.MaxBatchRows)
	if s.load.Rate > configs.MaxRate {
		bad("--rate must be <= %d requests per second, got %g", configs.MaxRate, s.load.Rate)
	}
	if c.IsSet("rate") && !(s.load.Rate > 0) {
		bad("--rate must be > 0 requests per second, got %g", s.load.Rate)
	}
	if s.load.Poisson && !c.IsSet("rate") {
		bad("--poisson needs --rate")
	}
	if s.ready < 0 {
		bad("--ready-timeout must be >= 0, got %s", s.ready)
	}

	s.opts = probe.Options{
		Connections: c.Int("connections"), Transport: transport, BatchSize: c.Int("batch"), Seed: c.Uint64("seed"),
		RequestTimeout: c.Duration("request-timeout"),
		MetricsPath:    c.String("metrics-path"), MetricsURL: c.String("metrics-url"), NoMetrics: c.Bool("no-metrics"),
	}
	sources := 0
	for _, f := range []string{"input", "request-file", "warmup-file"} {
		if c.IsSet(f) {
			sources++
		}
	}
	if sources > 1 {
		bad("give one payload source: --input, --request-file or --warmup-file")
	}
	for _, spec := range c.Generic("input").(*inputFlags).specs {
		in, err := parseInputFlag(spec)
		if err != nil {
			bad("--input %q: %v", spec, err)
			continue
		}
		s.opts.Inputs = append(s.opts.Inputs, in)
	}
	if p := c.String("request-file"); p != "" {
		req, err := probe.ReadRequestFile(p)
		if err != nil {
			bad("--request-file: %v", err)
		} else {
			s.opts.Requests = []*tfserving.PredictRequest{req}
		}
	}
	if p := c.String("warmup-file"); p != "" {
		reqs, err := probe.ReadWarmupFile(p)
		if err != nil {
			bad("--warmup-file: %v", err)
		} else {
			s.opts.Requests = reqs
		}
	}

	s.measure = probe.MeasureOptions{
		MinDuration: c.Duration("min-duration"), MaxDuration: c.Duration("max-duration"), Window: c.Duration("window"),
		ThroughputTolerance: c.Float64("throughput-tolerance"), P99Tolerance: c.Float64("p99-tolerance"),
		MaxPacingLag: c.Duration("max-pacing-lag"),
	}
	if c.IsSet("slo-latency") || c.IsSet("error-rate") {
		s.measure.SLO = &probe.SLO{Latency: c.Duration("slo-latency"), Quantile: c.Float64("slo-quantile"), ErrorRate: c.Float64("error-rate")}
	}
	if !c.Bool("no-warmup") {
		s.warmup = &probe.WarmupOptions{Requests: c.Int64("warmup-requests"), UntilSettled: c.Bool("warmup-until-settled"),
			MaxDuration: c.Duration("warmup-max")}
	} else if c.IsSet("warmup-requests") || c.IsSet("warmup-until-settled") {
		bad("--no-warmup contradicts --warmup-requests/--warmup-until-settled")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("probe: bad flags:\n  %s", strings.Join(problems, "\n  "))
	}
	return s, nil
}

// inputFlags collects repeated --input values whole (a string slice flag
// would split the shape at its commas).
type inputFlags struct{ specs []string }

func (f *inputFlags) Set(v string) error { f.specs = append(f.specs, v); return nil }
func (f *inputFlags) String() string     { return strings.Join(f.specs, " ") }

// parseInputFlag reads NAME:DTYPE:SHAPE, SHAPE being comma-separated sizes.
func parseInputFlag(s string) (probe.InputSpec, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 || parts[0] == "" {
		return probe.InputSpec{}, errors.New("want NAME:DTYPE:SHAPE, e.g. features:float32:-1,256")
	}
	in := probe.InputSpec{Name: parts[0], DType: parts[1]}
	if _, err := probe.ParseDType(parts[1]); err != nil {
		return in, err
	}
	if parts[2] != "" {
		for _, d := range strings.Split(parts[2], ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
			if err != nil {
				return in, fmt.Errorf("shape: %q is not an integer", d)
			}
			in.Shape = append(in.Shape, n)
		}
	}
	return in, nil
}

func runProbe(c *cli.Context) error {
	s, err := probeFlags(c)
	if err != nil {
		return err
	}
	ctx := c.Context
	out, errw := c.App.Writer, c.App.ErrWriter
	progress := progressPrinter(errw, c.Bool("quiet"))

	if !c.IsSet("ready-timeout") {
		// Unless asked to wait for a server that is starting, nothing
		// listening is said at once, not after a silent minute.
		if err := checkListening(ctx, s.target, s.opts.Transport == probe.REST); err != nil {
			return err
		}
	}
	if s.ready > 0 {
		if !c.Bool("quiet") {
			fmt.Fprintf(errw, "waiting up to %s for model %s to be AVAILABLE...\n", s.ready, s.target.Model)
		}
		o := &probe.ReadyOptions{REST: s.opts.Transport == probe.REST}
		if err := probe.WaitReady(ctx, s.target, s.ready, o); err != nil {
			return err
		}
	}
	client, err := probe.New(ctx, s.target, &s.opts)
	if err != nil {
		return err
	}
	defer client.Close()
	if s.warmup != nil {
		s.warmup.Progress = progress
		w, err := client.Warmup(ctx, s.load, s.warmup)
		if err != nil {
			return err
		}
		settled := "latency settled"
		switch {
		case w.StopReason == probe.StopWarmupCount:
			settled = "count reached"
		case !w.Settled:
			settled = "latency NOT settled by --warmup-max"
		}
		if !c.Bool("quiet") {
			clearLine(errw, c.Bool("quiet"))
			fmt.Fprintf(errw, "warmup: %d requests (%d failed) in %s, %s\n", w.Requests, w.Errors, w.Duration.Round(time.Millisecond), settled)
		}
	}
	s.measure.Progress = progress
	res, merr := client.Measure(ctx, s.load, &s.measure)
	clearLine(errw, c.Bool("quiet"))
	if res == nil {
		return merr
	}
	if c.Bool("json") {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out, probe.Summary(res))
		if c.Bool("series") {
			fmt.Fprintln(out, "\n   t      ok  errors    sent       p50       p99  in-flight")
			for _, sec := range res.Series {
				fmt.Fprintf(out, "%4d %7d %7d %7d %9s %9s %10d\n", sec.T, sec.OK, sec.Errors, sec.Sent,
					sec.P50.Round(time.Microsecond), sec.P99.Round(time.Microsecond), sec.InFlight)
			}
		}
	}
	return merr
}

// progressPrinter rewrites one status line on a terminal; elsewhere (logs,
// pipes) it stays silent so that output is clean.
func progressPrinter(w io.Writer, quiet bool) func(probe.Progress) {
	f, ok := w.(*os.File)
	if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func(p probe.Progress) {
		fmt.Fprintf(w, "\r\033[K%-9s %6.1fs  ok %d  errors %d  %.0f req/s  p99 %s  in flight %d",
			p.Phase, p.Elapsed.Seconds(), p.OK, p.Errors, p.QPS, p.P99.Round(10*time.Microsecond), p.InFlight)
	}
}

func clearLine(w io.Writer, quiet bool) {
	if f, ok := w.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(w, "\r\033[K")
	}
}

// inRange reports a flag whose value is outside [lo, hi]: 0 is an error,
// never clamped to something the user did not ask for.
func inRange(bad func(string, ...any), flag string, v, lo, hi int) {
	if v < lo || v > hi {
		bad("%s must be from %d to %d, got %d", flag, lo, hi, v)
	}
}
