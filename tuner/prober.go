package tuner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tfserving"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Prober measures one freshly started server: it waits until the model is
// AVAILABLE, warms it up and measures it under the study's load, calling
// phase as it moves to warming and measuring. An error means nothing was
// measured (the server never became ready, refused every request, or ctx
// ended); a measurement that ran but does not count comes back as a Result
// marked invalid.
//
// stopBelow, when above 0, is the throughput the trial must exceed to
// matter (the search's best so far): the measurement may stop as soon as
// its throughput is certainly below it (probe.StopDominated).
type Prober interface {
	Trial(ctx context.Context, ep runtime.Endpoints, stopBelow float64, phase func(store.TrialState)) (*probe.Result, error)
}

// StudyProber is the Prober for a study: real gRPC (or REST) traffic with
// the study's load, payload, warmup and SLO.
type StudyProber struct {
	study *configs.Study
	log   *slog.Logger

	mu   sync.Mutex
	reqs []*tfserving.PredictRequest // the payload, built once and reused across restarts
}

var _ Prober = (*StudyProber)(nil)

// NewStudyProber reads the study's payload files now, so that a bad file
// fails the study before any server is started. Generated and discovered
// payloads are built at the first trial (discovery needs a running server).
func NewStudyProber(s *configs.Study, log *slog.Logger) (*StudyProber, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &StudyProber{study: s, log: log}
	pl := s.Load.Payload
	switch {
	case pl.RequestFile != "":
		req, err := probe.ReadRequestFile(pl.RequestFile)
		if err != nil {
			return nil, fmt.Errorf("load.payload.request_file: %w", err)
		}
		p.reqs = []*tfserving.PredictRequest{req}
	case pl.WarmupFile != "":
		reqs, err := probe.ReadWarmupFile(pl.WarmupFile)
		if err != nil {
			return nil, fmt.Errorf("load.payload.warmup_file: %w", err)
		}
		p.reqs = reqs
	case len(pl.Inputs) > 0:
		req, err := probe.GenerateRequest(inputSpecs(pl.Inputs), pl.Batch, uint64(pl.Seed))
		if err != nil {
			return nil, fmt.Errorf("load.payload.inputs: %w", err)
		}
		p.reqs = []*tfserving.PredictRequest{req}
	}
	return p, nil
}

func inputSpecs(in []configs.Input) []probe.InputSpec {
	out := make([]probe.InputSpec, len(in))
	for i, x := range in {
		out[i] = probe.InputSpec{Name: x.Name, DType: x.DType, Shape: x.Shape}
	}
	return out
}

// Load is the study's load as the probe takes it.
func Load(s *configs.Study) probe.Load {
	l := s.Load
	if l.Mode == configs.LoadOpen {
		return probe.Load{Rate: l.Rate, Poisson: l.Arrival == configs.ArrivalPoisson, Seed: uint64(s.Search.Seed)}
	}
	return probe.Load{Concurrency: l.Concurrency}
}

// Target is where a started server's model is found.
func Target(s *configs.Study, ep runtime.Endpoints) probe.Target {
	return probe.Target{Addr: ep.GRPC, RESTAddr: ep.REST, Model: s.Target.Model.Name, Signature: s.Target.Model.Signature}
}

// Trial implements Prober.
func (p *StudyProber) Trial(ctx context.Context, ep runtime.Endpoints, stopBelow float64, phase func(store.TrialState)) (*probe.Result, error) {
	c, err := p.ready(ctx, ep, phase)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := p.study
	return c.Measure(ctx, Load(s), &probe.MeasureOptions{
		MinDuration: s.Load.MinDuration.D(),
		MaxDuration: s.Load.MaxDuration.D(),
		SLO:         studySLO(s),
		StopBelow:   stopBelow,
	})
}

// studySLO is the study's SLO as the probe's early stop takes it.
func studySLO(s *configs.Study) *probe.SLO {
	return &probe.SLO{Latency: s.SLO.Latency.D(), Quantile: s.SLO.Quantile, ErrorRate: s.SLO.ErrorRate}
}

// ready waits until the server's model is AVAILABLE, connects and warms it
// up under the study's load, and returns the client in the measuring
// phase. The caller closes the client.
func (p *StudyProber) ready(ctx context.Context, ep runtime.Endpoints, phase func(store.TrialState)) (*probe.Client, error) {
	s := p.study
	t := Target(s, ep)
	began := time.Now()
	if err := probe.WaitReady(ctx, t, s.Target.StartTimeout.D(), nil); err != nil {
		return nil, err
	}
	ready := time.Now()
	p.mu.Lock()
	reqs := p.reqs
	p.mu.Unlock()
	transport := probe.GRPC
	if s.Load.Transport == configs.TransportREST {
		transport = probe.REST
	}
	c, err := probe.New(ctx, t, &probe.Options{
		Connections:    s.Load.Connections,
		Transport:      transport,
		Requests:       reqs,
		BatchSize:      s.Load.Payload.Batch,
		Seed:           uint64(s.Load.Payload.Seed),
		RequestTimeout: s.Load.RequestTimeout.D(),
		MetricsURL:     ep.MetricsURL(),
		Logger:         p.log,
	})
	if err != nil {
		return nil, err
	}
	if reqs == nil {
		p.mu.Lock()
		p.reqs = c.Requests()
		p.mu.Unlock()
	}

	load := Load(s)
	phase(store.TrialWarming)
	w := s.Load.Warmup
	// Settling is judged on 100 ms buckets from 300 ms on, not the probe's
	// 250 ms from 1 s: a warm server settles at once, and the warmup is
	// paid on every trial. A server still settling keeps warming until
	// three buckets agree or the study's max_duration.
	wr, err := c.Warmup(ctx, load, &probe.WarmupOptions{
		Requests:     int64(w.Requests),
		UntilSettled: w.UntilSettled,
		MaxDuration:  w.MaxDuration.D(),
		MinDuration:  300 * time.Millisecond,
		Bucket:       100 * time.Millisecond,
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("warmup: %w", err)
	}
	p.log.Debug("server ready and warm", "ready", ready.Sub(began), "warmup", time.Since(ready),
		"warmup_requests", wr.Requests, "warmup_stop", wr.StopReason, "warmup_run", wr.Duration)
	phase(store.TrialMeasuring)
	return c, nil
}
