package probe

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TF Serving's metric names as its Prometheus exporter writes them.
const (
	MetricRequestCount   = ":tensorflow:serving:request_count"
	MetricRequestLatency = ":tensorflow:serving:request_latency"
	MetricQueuingLatency = ":tensorflow:serving:batching_session:queuing_latency"
	MetricBatchSize      = ":tensorflow:serving:batching_session:processed_batch_size"
	MetricPaddingSize    = ":tensorflow:serving:batching_session:padding_size"
)

// MetricsSnapshot is one scrape of a TF Serving metrics endpoint.
type MetricsSnapshot struct {
	At       time.Time
	Families map[string]*dto.MetricFamily
}

// Scrape reads and parses Prometheus text from url. Errors wrap ErrScrape.
func Scrape(ctx context.Context, client *http.Client, url string) (*MetricsSnapshot, error) {
	if client == nil {
		client = defaultHTTPClient()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrScrape, url, err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScrape, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("%w: GET %s: %s: %s (is monitoring enabled with --monitoring_config_file, and the path right?)",
			ErrScrape, url, resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrScrape, url, err)
	}
	return &MetricsSnapshot{At: time.Now(), Families: fams}, nil
}

// ServerMetrics are the server-side figures of a measurement: deltas of TF
// Serving's own metrics between a scrape before and one after. They say
// why a configuration performs as it does. Error, when set, says why they
// are missing or partial; a failed scrape never fails the measurement.
type ServerMetrics struct {
	Error string `json:"error,omitempty"`
	// RequestCount is request_count's increase by its status label.
	RequestCount map[string]float64 `json:"request_count,omitempty"`
	// Batches processed and their mean size (processed_batch_size).
	Batches       float64 `json:"batches"`
	MeanBatchSize float64 `json:"mean_batch_size"`
	// MeanQueuingLatency is the batching queue's mean wait per task and
	// MeanRequestLatency the server's mean request latency; QueuingShare is
	// their ratio, the part of server latency spent waiting for a batch.
	MeanQueuingLatency time.Duration `json:"mean_queuing_latency_ns"`
	MeanRequestLatency time.Duration `json:"mean_request_latency_ns"`
	QueuingShare       float64       `json:"queuing_share"`
	// MeanPadding is the padding added per batch; PaddingShare is padding
	// over processed batch sizes: the share of computed rows that were waste.
	MeanPadding  float64 `json:"mean_padding"`
	PaddingShare float64 `json:"padding_share"`
}

// agg is a summed counter or histogram over the series kept by a filter.
type agg struct {
	found      bool
	sum, count float64
}

// collectFamily sums a family's series whose model_name label (when it has
// one) is model. Counters, gauges and untyped add their value; histograms
// and summaries add sum and count.
func collectFamily(s *MetricsSnapshot, name, model string, by string) (agg, map[string]float64) {
	var a agg
	var parts map[string]float64
	if s == nil {
		return a, nil
	}
	f, ok := s.Families[name]
	if !ok {
		return a, nil
	}
	for _, m := range f.GetMetric() {
		keep, part := true, ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "model_name" && model != "" && l.GetValue() != model {
				keep = false
			}
			if l.GetName() == by {
				part = l.GetValue()
			}
		}
		if !keep {
			continue
		}
		a.found = true
		var v float64
		switch {
		case m.GetHistogram() != nil:
			a.sum += m.GetHistogram().GetSampleSum()
			v = float64(m.GetHistogram().GetSampleCount())
			a.count += v
		case m.GetSummary() != nil:
			a.sum += m.GetSummary().GetSampleSum()
			v = float64(m.GetSummary().GetSampleCount())
			a.count += v
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
			a.sum += v
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
			a.sum += v
		case m.GetUntyped() != nil:
			v = m.GetUntyped().GetValue()
			a.sum += v
		}
		if by != "" {
			if parts == nil {
				parts = map[string]float64{}
			}
			parts[part] += v
		}
	}
	return a, parts
}

// DeltaMetrics computes ServerMetrics from two scrapes of the same server
// for model (series with another model_name label are left out; series
// without the label, like the batching metrics, are all kept). Figures
// whose metric is missing are left zero and listed in Error.
func DeltaMetrics(before, after *MetricsSnapshot, model string) ServerMetrics {
	var sm ServerMetrics
	var missing []string
	delta := func(name string) (agg, bool) {
		b, _ := collectFamily(before, name, model, "")
		a, _ := collectFamily(after, name, model, "")
		if !a.found {
			missing = append(missing, name)
			return agg{}, false
		}
		return agg{found: true, sum: a.sum - b.sum, count: a.count - b.count}, true
	}
	_, pb := collectFamily(before, MetricRequestCount, model, "status")
	if _, pa := collectFamily(after, MetricRequestCount, model, "status"); pa != nil {
		sm.RequestCount = map[string]float64{}
		for k, v := range pa {
			if d := v - pb[k]; d != 0 {
				sm.RequestCount[k] = d
			}
		}
	} else {
		missing = append(missing, MetricRequestCount)
	}
	bs, okB := delta(MetricBatchSize)
	if okB && bs.count > 0 {
		sm.Batches = bs.count
		sm.MeanBatchSize = bs.sum / bs.count
	}
	q, okQ := delta(MetricQueuingLatency)
	if okQ && q.count > 0 {
		sm.MeanQueuingLatency = time.Duration(q.sum / q.count * float64(time.Microsecond))
	}
	rl, okR := delta(MetricRequestLatency)
	if okR && rl.count > 0 {
		sm.MeanRequestLatency = time.Duration(rl.sum / rl.count * float64(time.Microsecond))
	}
	if sm.MeanRequestLatency > 0 {
		sm.QueuingShare = float64(sm.MeanQueuingLatency) / float64(sm.MeanRequestLatency)
	}
	pad, okP := delta(MetricPaddingSize)
	if okP && pad.count > 0 {
		sm.MeanPadding = pad.sum / pad.count
	}
	if okP && okB && bs.sum > 0 {
		sm.PaddingShare = pad.sum / bs.sum
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		sm.Error = fmt.Sprintf("not exported by the server: %v", missing)
	}
	for _, v := range []*float64{&sm.MeanBatchSize, &sm.QueuingShare, &sm.MeanPadding, &sm.PaddingShare} {
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			*v = 0
		}
	}
	return sm
}
