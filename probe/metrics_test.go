package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tfMetrics renders TF Serving style Prometheus text for a server that has
// handled n requests in batches of 4 (1 padding row each), with queuing
// 300 µs and request latency 1200 µs per request.
func tfMetrics(n int) string {
	batches := n / 4
	return fmt.Sprintf(`# TYPE :tensorflow:serving:request_count counter
:tensorflow:serving:request_count{model_name="m",status="OK"} %d
:tensorflow:serving:request_count{model_name="m",status="UNAVAILABLE"} %d
:tensorflow:serving:request_count{model_name="other",status="OK"} 999
# TYPE :tensorflow:serving:request_latency histogram
:tensorflow:serving:request_latency_bucket{model_name="m",API="predict",entrypoint="GRPC",le="1000"} 0
:tensorflow:serving:request_latency_bucket{model_name="m",API="predict",entrypoint="GRPC",le="+Inf"} %d
:tensorflow:serving:request_latency_sum{model_name="m",API="predict",entrypoint="GRPC"} %d
:tensorflow:serving:request_latency_count{model_name="m",API="predict",entrypoint="GRPC"} %d
# TYPE :tensorflow:serving:batching_session:queuing_latency histogram
:tensorflow:serving:batching_session:queuing_latency_bucket{thread_pool_name="batch_threads",le="+Inf"} %d
:tensorflow:serving:batching_session:queuing_latency_sum{thread_pool_name="batch_threads"} %d
:tensorflow:serving:batching_session:queuing_latency_count{thread_pool_name="batch_threads"} %d
# TYPE :tensorflow:serving:batching_session:processed_batch_size histogram
:tensorflow:serving:batching_session:processed_batch_size_bucket{thread_pool_name="batch_threads",le="+Inf"} %d
:tensorflow:serving:batching_session:processed_batch_size_sum{thread_pool_name="batch_threads"} %d
:tensorflow:serving:batching_session:processed_batch_size_count{thread_pool_name="batch_threads"} %d
# TYPE :tensorflow:serving:batching_session:padding_size histogram
:tensorflow:serving:batching_session:padding_size_bucket{thread_pool_name="batch_threads",execution_batch_size="4",le="+Inf"} %d
:tensorflow:serving:batching_session:padding_size_sum{thread_pool_name="batch_threads",execution_batch_size="4"} %d
:tensorflow:serving:batching_session:padding_size_count{thread_pool_name="batch_threads",execution_batch_size="4"} %d
`, n, n/100, n, n*1200, n, n, n*300, n, batches, batches*4, batches, batches, batches, batches)
}

func TestDeltaMetrics(t *testing.T) {
	var n atomic.Int64
	n.Store(400)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, tfMetrics(int(n.Load())))
	}))
	defer srv.Close()
	before, err := Scrape(context.Background(), nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	n.Store(2400)
	after, err := Scrape(context.Background(), nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got := DeltaMetrics(before, after, "m")
	want := ServerMetrics{
		RequestCount:       map[string]float64{"OK": 2000, "UNAVAILABLE": 20}, // model "other" left out
		Batches:            500,
		MeanBatchSize:      4,
		MeanQueuingLatency: 300 * time.Microsecond,
		MeanRequestLatency: 1200 * time.Microsecond,
		QueuingShare:       0.25,
		MeanPadding:        1,
		PaddingShare:       0.25,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DeltaMetrics (-want +got):\n%s", diff)
	}
}

func TestScrapeErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/garbage" {
			io.WriteString(w, "this is { not prometheus\n")
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	for _, path := range []string{"/monitoring/prometheus/metrics", "/garbage"} {
		if _, err := Scrape(context.Background(), nil, srv.URL+path); !errors.Is(err, ErrScrape) {
			t.Errorf("%s: err = %v, want ErrScrape", path, err)
		}
	}
	// A server without batching exports no batching metrics: the delta
	// says which are missing instead of inventing zeros silently.
	got := DeltaMetrics(nil, &MetricsSnapshot{}, "m")
	if !strings.Contains(got.Error, MetricBatchSize) || !strings.Contains(got.Error, MetricRequestCount) {
		t.Errorf("missing metrics not reported: %q", got.Error)
	}
}

// Measure scrapes before and after; a broken endpoint is reported in the
// result and the measurement still succeeds.
func TestMeasureScrapes(t *testing.T) {
	f := &fakeServer{}
	addr := startFake(t, f)
	var broken atomic.Bool
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, tfMetrics(int(f.calls.Load())))
	}))
	defer metrics.Close()
	c, err := New(context.Background(), Target{Addr: addr, Model: "m"}, &Options{
		Inputs: []InputSpec{{Name: "x", DType: "float", Shape: []int64{-1, 4}}}, MetricsURL: metrics.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Measure(context.Background(), Load{Concurrency: 2}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The fake counts every request it served; the delta must equal what
	// the probe completed.
	if got := r.Server.RequestCount["OK"]; got != float64(r.Requests) || r.Server.MeanBatchSize != 4 || r.Server.Error != "" {
		t.Errorf("server metrics %+v for %d requests", r.Server, r.Requests)
	}

	c2, err := New(context.Background(), Target{Addr: addr, Model: "m", RESTAddr: strings.TrimPrefix(metrics.URL, "http://")}, &Options{
		Inputs: []InputSpec{{Name: "x", DType: "float", Shape: []int64{-1, 4}}}, MetricsPath: "/nope"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	broken.Store(true)
	r2, err := c2.Measure(context.Background(), Load{Concurrency: 1}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r2.Server.Error, "/nope") || !strings.Contains(r2.Server.Error, "404") || r2.OK == 0 || !r2.Valid {
		t.Errorf("scrape failure: server %+v, ok %d, valid %v", r2.Server, r2.OK, r2.Valid)
	}
	if !strings.Contains(Summary(r2), "metrics: probe: metrics scrape failed") {
		t.Errorf("summary hides the scrape failure:\n%s", Summary(r2))
	}
}
