package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Defaults of a soak (seed 001 §6.2: five minutes, errors under 0.01%).
const (
	DefaultDuration     = 5 * time.Minute
	DefaultInterval     = 10 * time.Second
	DefaultMaxErrorRate = 0.0001
)

// stopTimeout bounds stopping the soak's server.
const stopTimeout = 30 * time.Second

// errServerExited cancels the soak when its server dies.
var errServerExited = errors.New("verify: the server exited during the soak")

// ErrNoRate says a soak has no rate: none was given and the
// recommendation has no capacity to take it from (its run measured
// another objective, or its interval is too wide to plan on).
var ErrNoRate = errors.New("verify: no capacity to take the rate from")

// RateOf is a soak's rate when none is given: the rate a fleet is planned
// to load rec's configuration to, its capacity's lower bound
// (capacity.PlanningCapacity) × headroom, to 0.1 req/s; src says so in
// words. An error wrapping ErrNoRate says why there is none.
func RateOf(rec *store.Recommendation, headroom float64) (rate float64, src string, err error) {
	if !(rec.Capacity > 0) {
		return 0, "", fmt.Errorf("%w: recommendation %d (run %d) has no measured capacity", ErrNoRate, rec.Seq, rec.Run)
	}
	c, err := capacity.PlanningCapacity(rec.Capacity, rec.CapacityLow, rec.CapacityHigh)
	if err != nil {
		return 0, "", fmt.Errorf("%w: recommendation %d (run %d): %w", ErrNoRate, rec.Seq, rec.Run, err)
	}
	src = fmt.Sprintf("capacity_low %.1f x headroom %g", c, headroom)
	if !(rec.CapacityLow > 0 && rec.CapacityLow < rec.Capacity) {
		src = fmt.Sprintf("capacity %.1f (one repeat: no interval) x headroom %g", c, headroom)
	}
	return math.Round(10*c*headroom) / 10, src, nil
}

// Subject is the configuration verified and where it came from.
type Subject struct {
	// Run and Recommendation name the recommendation verified; 0 for a
	// configuration given by hand.
	Run, Recommendation uint64
	// Source says in words what is verified ("recommendation 3 of run 5",
	// "--config prod.config").
	Source string
	// Batching is the batching.config and Flags the server flags as
	// export writes them (see Launch).
	Batching []byte
	Flags    []string
}

// Options vary a soak. Rate is required; zero durations and error rate
// take the defaults above.
type Options struct {
	Rate         float64
	RateSource   string
	Duration     time.Duration
	Interval     time.Duration
	MaxErrorRate float64
	// Cores resolves TF's default num_batch_threads for the causes.
	Cores int
	// Logger receives the steps; nil discards.
	Logger *slog.Logger
	// Progress, when set, receives the probe's progress once a second.
	Progress func(probe.Progress)
}

func (o Options) withDefaults() Options {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxErrorRate == 0 {
		o.MaxErrorRate = DefaultMaxErrorRate
	}
	if o.Cores <= 0 {
		o.Cores = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Check returns every problem of o, naming the field.
func (o Options) Check() error {
	o = o.withDefaults()
	var ps configs.Problems
	if !(o.Rate > 0) {
		ps.Add("rate", "must be a positive number of requests per second, got %g", o.Rate)
	}
	if o.Duration < time.Second {
		ps.Add("duration", "must be at least 1s, got %s", o.Duration)
	}
	if o.Interval < time.Second || o.Interval%time.Second != 0 {
		ps.Add("interval", "must be a whole number of seconds, got %s", o.Interval)
	} else if o.Interval > o.Duration {
		ps.Add("interval", "%s is longer than the duration %s", o.Interval, o.Duration)
	}
	if !(o.MaxErrorRate > 0 && o.MaxErrorRate < 1) {
		ps.Add("max_error_rate", "must be a fraction in (0, 1), got %g", o.MaxErrorRate)
	}
	return ps.Err()
}

// Run verifies sub on the study's server: it starts it through rt (which
// the caller has recovered and restores afterwards), waits until the model
// is AVAILABLE, warms it up at the soak's rate as the study's warmup says,
// holds the rate for the duration and judges the soak. The record is
// returned for the caller to store, also when the verdict is
// store.VerifyError (the server did not start, become ready or warm up:
// the returned error says why). An error with a nil record means nothing
// was tried (bad options, ctx ended).
func Run(ctx context.Context, s *configs.Study, rt runtime.Runtime, sub Subject, o Options) (*store.Verification, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	launch, err := Launch(sub.Batching, sub.Flags)
	if err != nil {
		return nil, err
	}
	params, err := Params(sub.Batching, launch, o.Cores)
	if err != nil {
		return nil, err
	}
	prober, err := tuner.NewStudyProber(s, o.Logger)
	if err != nil {
		return nil, err
	}
	v := &store.Verification{
		Study: s.Name, Run: sub.Run, Recommendation: sub.Recommendation, Source: sub.Source,
		Config: params, Batching: string(sub.Batching), Flags: sub.Flags,
		Started: time.Now().UTC(), Duration: o.Duration, Interval: o.Interval,
		Rate: o.Rate, RateSource: o.RateSource,
		SLO: s.SLO.Latency.D(), Quantile: s.SLO.Quantile, MaxErrorRate: o.MaxErrorRate,
	}
	fail := func(err error) (*store.Verification, error) {
		v.Verdict = store.VerifyError
		v.Failures = []string{err.Error()}
		return v, err
	}
	o.Logger.Info("verify: starting the server", "study", s.Name, "source", sub.Source, "rate", o.Rate, "duration", o.Duration)
	srv, err := rt.Start(ctx, launch)
	if err != nil {
		return fail(fmt.Errorf("start: %w", err))
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-srv.Done():
			cancel(errServerExited)
		case <-sctx.Done():
		}
	}()
	res, serr := soak(sctx, s, prober, srv.Endpoints(), o)
	died := context.Cause(sctx) == errServerExited
	stctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	if err := srv.Stop(stctx); err != nil {
		o.Logger.Warn("verify: stopping the server", "err", err)
	}
	scancel()
	switch {
	case died && res == nil:
		return fail(fmt.Errorf("the server exited before the soak: %s", srv.Exit().Reason()))
	case died:
		Fill(v, res)
		Judge(v, "")
		v.Verdict = store.VerifyFailed
		v.Failures = append([]string{"the server exited during the soak: " + srv.Exit().Reason()}, v.Failures...)
		v.Causes = append([]store.Cause{{Name: "server", Detail: "the server exited: " + srv.Exit().Reason()}}, v.Causes...)
		return v, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("verify: %w", context.Cause(ctx))
	case serr != nil && res == nil:
		return fail(serr)
	}
	Fill(v, res)
	invalid := ""
	if !res.Result.Valid {
		invalid = res.Result.InvalidReason
	}
	Judge(v, invalid)
	o.Logger.Info("verify: soak ended", "verdict", v.Verdict, "achieved", v.Achieved, "p99", v.P99, "error_rate", v.ErrorRate)
	return v, nil
}

// soak waits for the server, warms it up and holds the rate.
func soak(ctx context.Context, s *configs.Study, p *tuner.StudyProber, ep runtime.Endpoints, o Options) (*probe.SoakResult, error) {
	t := tuner.Target(s, ep)
	if err := probe.WaitReady(ctx, t, s.Target.StartTimeout.D(), nil); err != nil {
		return nil, err
	}
	transport := probe.GRPC
	if s.Load.Transport == configs.TransportREST {
		transport = probe.REST
	}
	c, err := probe.New(ctx, t, &probe.Options{
		Connections:    s.Load.Connections,
		Transport:      transport,
		Requests:       p.Requests(),
		BatchSize:      s.Load.Payload.Batch,
		Seed:           uint64(s.Load.Payload.Seed),
		RequestTimeout: s.Load.RequestTimeout.D(),
		MetricsURL:     ep.MetricsURL(),
		Logger:         o.Logger,
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	load := probe.Load{Rate: o.Rate, Poisson: s.Load.Arrival == configs.ArrivalPoisson, Seed: uint64(s.Search.Seed)}
	w := s.Load.Warmup
	if _, err := c.Warmup(ctx, load, &probe.WarmupOptions{
		Requests: int64(w.Requests), UntilSettled: w.UntilSettled, MaxDuration: w.MaxDuration.D(),
		MinDuration: 300 * time.Millisecond, Bucket: 100 * time.Millisecond,
	}); err != nil {
		return nil, fmt.Errorf("warmup: %w", err)
	}
	lag := max(10*time.Millisecond, s.SLO.Latency.D()/10)
	return c.Soak(ctx, load, &probe.SoakOptions{
		Duration: o.Duration, Interval: o.Interval, Quantile: s.SLO.Quantile,
		MaxPacingLag: lag, Progress: o.Progress,
	})
}

// Fill copies a soak's figures into v.
func Fill(v *store.Verification, res *probe.SoakResult) {
	r := res.Result
	v.Requests, v.OK, v.Unfinished = r.Requests, r.OK, r.Unfinished
	v.Errors = nil
	for code, n := range r.Errors {
		if v.Errors == nil {
			v.Errors = map[string]int64{}
		}
		v.Errors[code] = n
	}
	if all := r.Requests + r.Unfinished; all > 0 {
		v.ErrorRate = float64(r.Requests-r.OK+r.Unfinished) / float64(all)
	}
	v.Achieved, v.SentRate, v.RateKept, v.RateNote = r.QPS, r.SentRate, r.RateKept, r.RateNote
	v.P50, v.P99 = r.Latency.P50, r.Latency.P99
	v.MeanBatch, v.QueueShare = r.Server.MeanBatchSize, share(r.Server.QueuingShare)
	var notes []string
	if r.Server.Error != "" {
		notes = append(notes, "server metrics: "+r.Server.Error)
	}
	if !r.Valid {
		notes = append(notes, "generator: "+r.InvalidReason)
	}
	v.Note = strings.Join(notes, "; ")
	v.Intervals = make([]store.VerifyInterval, len(res.Intervals))
	for i, iv := range res.Intervals {
		out := store.VerifyInterval{
			Start: iv.Start, Dur: iv.Dur, Sent: iv.Sent, OK: iv.OK, Errors: iv.Errors,
			P50: iv.Latency.P50, Quantile: iv.Quantile, Max: iv.Latency.Max,
			MeanBatch: iv.Server.MeanBatchSize, QueueShare: share(iv.Server.QueuingShare),
		}
		if iv.Dur > 0 {
			out.Rate = float64(iv.OK) / iv.Dur.Seconds()
		}
		for status, n := range iv.Server.RequestCount {
			if strings.EqualFold(status, "UNAVAILABLE") || status == "14" {
				out.Rejected += n
			}
		}
		v.Intervals[i] = out
	}
}

// share bounds a queueing share at 1: requests the server refuses at once
// count in its mean request latency but never queue, so a server that
// rejects most requests reports a "share" over 100%. All of the served
// requests' latency was queueing then, at most.
func share(s float64) float64 { return min(s, 1) }
