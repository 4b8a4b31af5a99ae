// Package verify is the acceptance soak of seed 001 §6.2: a configuration
// is started on the study's runtime, warmed up, and held at a rate (by
// default the recommendation's capacity lower bound times the headroom)
// for a duration; it passes only when the SLO's latency quantile is under
// the SLO in every interval, the error rate over the whole soak is under a
// bound (0.01% by default) and the rate was kept.
//
// Data flows one way: Launch turns a batching.config and exported server
// flags into the runtime's Config; Run starts the server, waits for it,
// warms it up and runs probe's Soak (one continuous open-loop run, cut
// into contiguous intervals, latency from the intended send time); Fill
// turns the soak into a store.Verification; Judge gives the verdict and
// names the likely causes of a failure from the server's own metrics
// (queue rejections, batch sizes against max_batch_size, the queueing
// share of latency, errors the server never counted). The caller stores
// the record (store.AddVerification) and acts on the verdict: the CLI
// exits non-zero, the daemon keeps its incumbent.
package verify
