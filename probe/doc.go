// Package probe measures a TensorFlow Serving model under a fixed load: it
// waits for the model to be ready, warms it up, drives a closed-loop
// (fixed concurrency) or open-loop (fixed rate) load over gRPC or REST,
// stops by statistics, and returns a Result with corrected latency
// percentiles, throughput, errors by code, a per-second series, the
// generator's own health, and the server's metric deltas. It never prints,
// exits or installs signal handlers; every blocking call takes a context.
//
// A trial flows through it like this:
//
//	WaitReady(ctx, target, timeout, nil)        GetModelStatus (or REST) until AVAILABLE
//	c, _ := New(ctx, target, &Options{...})     payload built and encoded once, connections opened
//	c.Warmup(ctx, load, nil)                    one checked request, then load until latency settles
//	res, _ := c.Measure(ctx, load, &MeasureOptions{SLO: ...})
//	Summary(res)                                a human summary; res is also JSON-encodable
//
// Payloads come from an input description (GenerateRequest: seeded random
// values), a protobuf-JSON PredictRequest file (ReadRequestFile), a TF
// Serving warmup file (ReadWarmupFile, TFRecord with CRCs checked by
// probe/tfrecord), or, when nothing is given, from the model's own
// signature (DiscoverInputs). Each request is marshalled once. The gRPC hot
// path (h2.go) is probe's own client for the one unary call it makes,
// written on x/net's HTTP/2 framer and hpack: a header block encoded once,
// frames from all workers batched into one write, answers dropped unread
// (only grpc-status counts), one goroutine hand-off per request; it costs
// about half of grpc-go's client CPU per request and a quarter of ghz's
// (see experiments/probe-vs-ghz). Transport GRPCLib uses grpc-go's client
// instead, with a pass-through codec; typed control calls (status,
// metadata, the check request) always go through grpc-go.
//
// Inside a run, workers record each request's intended send, actual send
// and completion times into per-worker buffers; the calling goroutine
// collects them every 50 ms into HDR histograms (3 significant digits) it
// alone owns, finalises one-second buckets, feeds the stopping rule
// (documented on MeasureOptions) and checks the SLO breach rule (on
// breachCheck's terms: exact counting in open loop, 99.9% confidence in
// closed loop) and, given a throughput to beat (MeasureOptions.StopBelow),
// the dominated rule (dominatedCheck: the windows' mean throughput below
// it with 99.9% confidence). Open-loop requests are paced by a Pacer (constant or
// Poisson) and their latency counts from the intended send time, so a
// stalled server shows in the figures instead of hiding behind requests
// that were never sent (coordinated omission); ServiceTime, from the actual
// send, is kept beside it. Workers are added when none is idle, up to a
// bound; the Result says when the offered rate could not be kept.
//
// A measurement the generator itself limited (its CPU saturated, its pacing
// late with workers free) is returned with Valid false and the reason: it
// must not be scored. A metrics scrape that fails is reported in the
// Result's Server section, never fatal.
package probe
