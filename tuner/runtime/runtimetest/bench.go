package runtimetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/batchtune/batchtune/tuner/runtime"
)

// BenchRestart measures what one trial restart costs on rt (already
// recovered): each iteration stops the previous server, starts one with cfg
// and waits until both ports answer. It reports, besides ns/op, the parts:
// stop-ms (Stop of the previous server), start-ms (Start until it returns),
// answer-ms (Start until both ports answer), and p50/p90/max of answer-ms.
func BenchRestart(b *testing.B, rt runtime.Runtime, cfg runtime.Config) {
	ctx := context.Background()
	var prev runtime.Server
	var stops, starts, answers []time.Duration
	for b.Loop() {
		if prev != nil {
			t0 := time.Now()
			if err := prev.Stop(ctx); err != nil {
				b.Fatalf("Stop: %v", err)
			}
			stops = append(stops, time.Since(t0))
		}
		t0 := time.Now()
		srv, err := rt.Start(ctx, cfg)
		if err != nil {
			b.Fatalf("Start: %v", err)
		}
		starts = append(starts, time.Since(t0))
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = runtime.WaitPorts(wctx, srv)
		cancel()
		if err != nil {
			b.Fatalf("WaitPorts: %v\n%s", err, srv.Exit().Log)
		}
		answers = append(answers, time.Since(t0))
		prev = srv
	}
	b.StopTimer()
	if prev != nil {
		prev.Stop(ctx)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	mean := func(ds []time.Duration) float64 {
		if len(ds) == 0 {
			return 0
		}
		var s time.Duration
		for _, d := range ds {
			s += d
		}
		return ms(s / time.Duration(len(ds)))
	}
	q := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return ms(s[int(p*float64(len(s)-1))])
	}
	b.ReportMetric(mean(stops), "stop-ms")
	b.ReportMetric(mean(starts), "start-ms")
	b.ReportMetric(mean(answers), "answer-ms")
	b.ReportMetric(q(answers, 0.5), "answer-p50-ms")
	b.ReportMetric(q(answers, 0.9), "answer-p90-ms")
	b.ReportMetric(q(answers, 1), "answer-max-ms")
}
