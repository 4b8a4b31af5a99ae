// Command driver is the emulator-surface experiment's closed-loop load
// generator: C clients over N gRPC connections, each sending its next
// Predict as soon as the previous one returns, for a warmup period and then
// a measured period. It exists because the probe package was being written
// at the same time; it is deliberately small and lives only here.
//
// It prints one JSON object: achieved QPS, counts by gRPC code, latency
// percentiles (µs, HDR histogram, from the actual send: closed loop has no
// intended send time), the stand-in's mean executed batch size and mean
// queuing latency over the measured period (deltas of its Prometheus
// metrics), and the driver's own CPU use, so that a driver that is itself
// the bottleneck shows.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/tfserving"
)

type result struct {
	Concurrency  int            `json:"concurrency"`
	Seconds      float64        `json:"seconds"`
	QPS          float64        `json:"qps"`
	OK           int64          `json:"ok"`
	Errors       map[string]int `json:"errors,omitempty"`
	ErrorRate    float64        `json:"error_rate"`
	P50us        int64          `json:"p50_us"`
	P90us        int64          `json:"p90_us"`
	P99us        int64          `json:"p99_us"`
	P999us       int64          `json:"p999_us"`
	MeanUS       float64        `json:"mean_us"`
	MeanBatch    float64        `json:"mean_batch"`
	MeanQueueUS  float64        `json:"mean_queue_us"`
	DriverCPUPct float64        `json:"driver_cpu_pct"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8500", "stand-in gRPC address")
	metricsURL := flag.String("metrics", "", "stand-in Prometheus URL (optional)")
	modelName := flag.String("model", "ranker", "model name")
	inputs := flag.String("inputs", "features:256:float", "the request's inputs: name:width:float|int64, comma-separated")
	rows := flag.Int("rows", 1, "rows per request")
	conc := flag.Int("c", 64, "concurrent clients (closed loop)")
	conns := flag.Int("conns", 4, "gRPC connections")
	warm := flag.Duration("warmup", 3*time.Second, "unmeasured warmup")
	dur := flag.Duration("d", 10*time.Second, "measured duration")
	wait := flag.Duration("wait", 60*time.Second, "how long to wait for the model to be AVAILABLE")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request deadline")
	label := flag.String("label", "", "with -row: the row's first column")
	header := flag.Bool("header", false, "print the -row column names and exit")
	row := flag.Bool("row", false, "print one tab-separated row instead of JSON")
	flag.Parse()
	printRow = *row
	rowLabel = *label
	if *header {
		fmt.Println(RowHeader)
		return
	}

	if err := run(*addr, *metricsURL, *modelName, *inputs, *rows, *conc, *conns, *warm, *dur, *wait, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

func run(addr, metricsURL, modelName, inputs string, rows, conc, nconns int, warm, dur, wait, timeout time.Duration) error {
	var conns []*grpc.ClientConn
	for i := 0; i < nconns; i++ {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer c.Close()
		conns = append(conns, c)
	}
	if err := waitReady(conns[0], modelName, wait); err != nil {
		return err
	}
	req, err := request(modelName, inputs, rows)
	if err != nil {
		return err
	}

	start := time.Now()
	measureFrom := start.Add(warm)
	end := measureFrom.Add(dur)
	type clientStats struct {
		h      *hdrhistogram.Histogram
		ok     int64
		errors map[string]int
	}
	stats := make([]*clientStats, conc)
	var before map[string]*dto.MetricFamily
	var cpuBefore time.Duration
	var once sync.Once
	mark := func() {
		once.Do(func() {
			cpuBefore, _ = probe.ProcessCPU()
			if metricsURL != "" {
				before, _ = scrape(metricsURL)
			}
		})
	}
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		cs := &clientStats{h: hdrhistogram.New(1, 60_000_000, 3), errors: map[string]int{}}
		stats[i] = cs
		client := tfserving.NewPredictionServiceClient(conns[i%len(conns)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				if !t0.Before(measureFrom) {
					mark()
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				_, err := client.Predict(ctx, req)
				cancel()
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					cs.errors[status.Code(err).String()]++
					continue
				}
				cs.ok++
				_ = cs.h.RecordValue(time.Since(t0).Microseconds())
			}
		}()
	}
	wg.Wait()
	mark()
	elapsed := time.Since(measureFrom)
	cpuAfter, _ := probe.ProcessCPU()
	cpu := cpuAfter - cpuBefore

	h := hdrhistogram.New(1, 60_000_000, 3)
	res := result{Concurrency: conc, Seconds: elapsed.Seconds(), Errors: map[string]int{}}
	var errs int64
	for _, cs := range stats {
		h.Merge(cs.h)
		res.OK += cs.ok
		for k, v := range cs.errors {
			res.Errors[k] += v
			errs += int64(v)
		}
	}
	res.QPS = float64(res.OK) / elapsed.Seconds()
	if total := res.OK + errs; total > 0 {
		res.ErrorRate = float64(errs) / float64(total)
	}
	res.P50us, res.P90us = h.ValueAtQuantile(50), h.ValueAtQuantile(90)
	res.P99us, res.P999us = h.ValueAtQuantile(99), h.ValueAtQuantile(99.9)
	res.MeanUS = h.Mean()
	res.DriverCPUPct = 100 * cpu.Seconds() / elapsed.Seconds()
	if metricsURL != "" && before != nil {
		if after, err := scrape(metricsURL); err == nil {
			c, s := histDelta(before, after, ":tensorflow:serving:batching_session:processed_batch_size")
			if c > 0 {
				res.MeanBatch = s / c
			}
			c, s = histDelta(before, after, ":tensorflow:serving:batching_session:queuing_latency")
			if c > 0 {
				res.MeanQueueUS = s / c
			}
		}
	}
	if len(res.Errors) == 0 {
		res.Errors = nil
	}
	if printRow {
		errPct := 100 * res.ErrorRate
		fmt.Printf("%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%.2f\t%.0f\n", rowLabel, res.QPS,
			float64(res.P50us)/1000, float64(res.P99us)/1000, float64(res.P999us)/1000, errPct, res.MeanBatch, res.MeanQueueUS/1000, res.DriverCPUPct)
		return nil
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// RowHeader names the columns of -row output.
const RowHeader = "config\tqps\tp50_ms\tp99_ms\tp999_ms\terr_pct\tmean_batch\tqueue_ms\tdriver_cpu_pct"

var (
	printRow bool
	rowLabel string
)

// request builds a Predict request from an inputs spec
// ("features:256:float,ids:32:int64") with rows rows of seeded values.
func request(modelName, spec string, rows int) (*tfserving.PredictRequest, error) {
	rng := rand.New(rand.NewPCG(1, 1))
	req := &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: modelName}, Inputs: map[string]*tfserving.TensorProto{}}
	for _, in := range strings.Split(spec, ",") {
		parts := strings.Split(in, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("input %q: want name:width:float|int64", in)
		}
		width, err := strconv.Atoi(parts[1])
		if err != nil || width <= 0 {
			return nil, fmt.Errorf("input %q: bad width", in)
		}
		tp := &tfserving.TensorProto{TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: int64(rows)}, {Size: int64(width)}}}}
		switch parts[2] {
		case "float":
			tp.Dtype = tfserving.DataType_DT_FLOAT
			for i := 0; i < rows*width; i++ {
				tp.FloatVal = append(tp.FloatVal, float32(rng.NormFloat64()))
			}
		case "int64":
			tp.Dtype = tfserving.DataType_DT_INT64
			for i := 0; i < rows*width; i++ {
				tp.Int64Val = append(tp.Int64Val, rng.Int64N(1000))
			}
		default:
			return nil, fmt.Errorf("input %q: dtype must be float or int64", in)
		}
		req.Inputs[parts[0]] = tp
	}
	return req, nil
}

func waitReady(conn *grpc.ClientConn, name string, wait time.Duration) error {
	mc := tfserving.NewModelServiceClient(conn)
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := mc.GetModelStatus(ctx, &tfserving.GetModelStatusRequest{ModelSpec: &tfserving.ModelSpec{Name: name}})
		cancel()
		if err == nil && len(st.GetModelVersionStatus()) > 0 && st.GetModelVersionStatus()[0].GetState() == tfserving.ModelVersionStatus_AVAILABLE {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("model %s not AVAILABLE after %v: %v", name, wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(resp.Body)
}

// histDelta sums a histogram family's count and sum over its series,
// after minus before.
func histDelta(before, after map[string]*dto.MetricFamily, name string) (count, sum float64) {
	tot := func(f *dto.MetricFamily) (c, s float64) {
		for _, m := range f.GetMetric() {
			c += float64(m.GetHistogram().GetSampleCount())
			s += m.GetHistogram().GetSampleSum()
		}
		return
	}
	c1, s1 := tot(before[name])
	c2, s2 := tot(after[name])
	return c2 - c1, s2 - s1
}
