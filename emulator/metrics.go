package emulator

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names as TF Serving's Prometheus exporter writes them: the
// monitoring path with "/" replaced by ":".
const (
	MetricRequestCount       = ":tensorflow:serving:request_count"
	MetricRequestLatency     = ":tensorflow:serving:request_latency"
	MetricQueuingLatency     = ":tensorflow:serving:batching_session:queuing_latency"
	MetricProcessedBatchSize = ":tensorflow:serving:batching_session:processed_batch_size"
	MetricPaddingSize        = ":tensorflow:serving:batching_session:padding_size"
	MetricInputBatchSize     = ":tensorflow:serving:batching_session:input_batch_size"
)

// DefaultMonitoringPath is TF Serving's Prometheus path.
const DefaultMonitoringPath = "/monitoring/prometheus/metrics"

// metrics are the TF Serving metrics the stand-in exports, in a registry
// of their own (no global state: several servers can live in one process).
type metrics struct {
	reg            *prometheus.Registry
	requestCount   *prometheus.CounterVec
	requestLatency *prometheus.HistogramVec
	queuingLatency *prometheus.HistogramVec
	processedBatch prometheus.Histogram
	padding        *prometheus.HistogramVec
	inputBatch     prometheus.Histogram
}

// TF's monitoring::Buckets::Exponential(scale, growth, count): count
// boundaries scale·growthⁱ, i = 0..count-1 (the +Inf bucket is implicit).
func tfBuckets(scale, growth float64, count int) []float64 {
	return prometheus.ExponentialBuckets(scale, growth, count)
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requestCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequestCount, Help: "The total number of requests.",
		}, []string{"model_name", "status"}),
		requestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRequestLatency,
			Help:    "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
			Buckets: tfBuckets(10, 1.8, 33),
		}, []string{"model_name", "API", "entrypoint"}),
		queuingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricQueuingLatency,
			Help:    "Distribution of wall time spent (in microseconds) in queuing",
			Buckets: tfBuckets(100, 1.2, 52),
		}, []string{"thread_pool_name"}),
		processedBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricProcessedBatchSize,
			Help:    "Tracks the batch size distribution on processing.",
			Buckets: tfBuckets(1, 2, 14),
		}),
		padding: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricPaddingSize,
			Help:    "Tracks the padding size distribution on batches.",
			Buckets: tfBuckets(1, 2, 14),
		}, []string{"execution_batch_size"}),
		inputBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricInputBatchSize,
			Help:    "Tracks the batch size distribution on the inputs.",
			Buckets: tfBuckets(1, 2, 14),
		}),
	}
	m.reg.MustRegister(m.requestCount, m.requestLatency, m.queuingLatency, m.processedBatch, m.padding, m.inputBatch)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
