package sim

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/tfserving"
)

func loadModel(t testing.TB, name string) model.Description {
	t.Helper()
	m, err := model.Load("../../configs/models/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return m.Desc
}

func batching(mbs, timeout, threads, queue int64) *tfserving.BatchingParameters {
	return &tfserving.BatchingParameters{
		MaxBatchSize: wrapperspb.Int64(mbs), BatchTimeoutMicros: wrapperspb.Int64(timeout),
		NumBatchThreads: wrapperspb.Int64(threads), MaxEnqueuedBatches: wrapperspb.Int64(queue),
	}
}

func run(t *testing.T, tr Trial) *Result {
	t.Helper()
	if tr.Calibration == nil {
		tr.Calibration = testCalibration()
	}
	if tr.Duration == 0 {
		tr.Duration = 4 * time.Second
	}
	if tr.Warmup == 0 {
		tr.Warmup = time.Second
	}
	r, err := Run(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// zeroHost is a calibration under which host work costs nothing, so that
// a trial's figures come from the device model and the scheduler alone.
func zeroHost() *Calibration {
	c := testCalibration()
	for i := range c.Host {
		for j := range c.Host[i].Points {
			p := &c.Host[i].Points[j]
			p.MainCPUus, p.AfterCPUus, p.AfterWallUS = 0, 0, 0
		}
	}
	c.Serving = ServingCosts{}
	c.Noise = Noise{}
	return c
}

// TestDeviceBoundThroughput checks the accelerator's cost curve comes
// through: one client, batches of one row, nothing else costs time, so a
// request takes the device's warm time for one row (jitter averages out).
func TestDeviceBoundThroughput(t *testing.T) {
	m := loadModel(t, "ranker")
	r := run(t, Trial{Model: m, Batching: batching(1, 0, 1, 10), Load: Load{Concurrency: 1}, Calibration: zeroHost(), Seed: 3})
	warm := m.Accelerator.WarmTime(1)
	if want := 1 / warm.Seconds(); math.Abs(r.QPS-want)/want > 0.02 {
		t.Errorf("QPS %.1f, want %.1f ± 2%%", r.QPS, want)
	}
	if p := r.Latency.P50; p < warm*95/100 || p > warm*105/100 {
		t.Errorf("P50 %s, want about %s", p, warm)
	}
}

// TestBatchTimeoutIsWaited checks that a lone client waits the batch
// timeout for a batch that never fills, and not without one.
func TestBatchTimeoutIsWaited(t *testing.T) {
	m := loadModel(t, "ranker")
	with := run(t, Trial{Model: m, Batching: batching(8, 5000, 1, 10), Load: Load{Concurrency: 1}, Seed: 1})
	without := run(t, Trial{Model: m, Batching: batching(8, 0, 1, 10), Load: Load{Concurrency: 1}, Seed: 1})
	if with.Latency.P50 < 5*time.Millisecond+without.Latency.P50*9/10 {
		t.Errorf("P50 with a 5ms timeout %s, without %s: want the timeout added", with.Latency.P50, without.Latency.P50)
	}
	if with.MeanBatch != 1 || without.MeanBatch != 1 {
		t.Errorf("mean batch %.2f and %.2f, want 1 with one client", with.MeanBatch, without.MeanBatch)
	}
}

// TestQueueBoundRejects checks max_enqueued_batches: 64 clients against
// batches of 4 with room for one batch get UNAVAILABLE; with room for
// every client they get none.
func TestQueueBoundRejects(t *testing.T) {
	m := loadModel(t, "ranker")
	full := run(t, Trial{Model: m, Batching: batching(4, 0, 1, 1), GRPCMaxThreads: 256, Load: Load{Concurrency: 64}, Seed: 1})
	if full.Errors["Unavailable"] == 0 || full.ErrorRate < 0.5 {
		t.Errorf("errors %v (rate %.3f), want mostly Unavailable", full.Errors, full.ErrorRate)
	}
	if full.Requests != full.OK+full.Errors["Unavailable"] {
		t.Errorf("requests %d != ok %d + unavailable %d", full.Requests, full.OK, full.Errors["Unavailable"])
	}
	roomy := run(t, Trial{Model: m, Batching: batching(4, 0, 1, 16), GRPCMaxThreads: 256, Load: Load{Concurrency: 64}, Seed: 1})
	if roomy.Requests != roomy.OK || roomy.ErrorRate != 0 {
		t.Errorf("with 16 batches of room: %d of %d ok, errors %v", roomy.OK, roomy.Requests, roomy.Errors)
	}
}

// TestGRPCThreadsCapInFlight checks --grpc_max_threads: with 4 server
// threads no batch can hold more than 4 requests, whatever the clients.
func TestGRPCThreadsCapInFlight(t *testing.T) {
	m := loadModel(t, "ranker")
	capped := run(t, Trial{Model: m, Batching: batching(32, 2000, 1, 64), GRPCMaxThreads: 4, Load: Load{Concurrency: 64}, Seed: 1})
	if capped.MeanBatch > 4 {
		t.Errorf("mean batch %.2f with 4 gRPC threads, want at most 4", capped.MeanBatch)
	}
	open := run(t, Trial{Model: m, Batching: batching(32, 2000, 1, 64), GRPCMaxThreads: 256, Load: Load{Concurrency: 64}, Seed: 1})
	if open.MeanBatch <= 8 {
		t.Errorf("mean batch %.2f with 256 gRPC threads, want batches well above 8", open.MeanBatch)
	}
}

// TestLittlesLaw checks the closed loop's bookkeeping: with C clients,
// completed requests per second times the time a request spends in the
// system (its latency plus the client's share of the work, which the
// latency does not count) is C.
func TestLittlesLaw(t *testing.T) {
	cal := testCalibration()
	cal.Noise = Noise{}
	r := run(t, Trial{Model: loadModel(t, "ranker"), Batching: batching(16, 1000, 2, 8), GRPCMaxThreads: 256, Load: Load{Concurrency: 32}, Calibration: cal, Seed: 2})
	clientShare := time.Duration(cal.Serving.ClientCPUus/2) * time.Microsecond
	inSystem := (r.Latency.Mean + clientShare).Seconds()
	if got := float64(r.Requests) / r.Duration.Seconds() * inSystem; math.Abs(got-32)/32 > 0.05 {
		t.Errorf("throughput × time in system = %.2f, want 32 ± 5%%", got)
	}
}

// TestSeeds checks that a trial is a function of its seed, and that
// repeats with other seeds differ.
func TestSeeds(t *testing.T) {
	tr := Trial{Model: loadModel(t, "ranker"), Batching: batching(16, 1000, 2, 8), GRPCMaxThreads: 256, Load: Load{Concurrency: 32}, Seed: 7}
	a, b := run(t, tr), run(t, tr)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different results (-first +second):\n%s", diff)
	}
	tr.Seed = 8
	c := run(t, tr)
	if a.QPS == c.QPS && a.Latency == c.Latency {
		t.Errorf("seeds 7 and 8 gave identical results: %+v", a)
	}
}

// TestLoadFailures checks the configurations the stand-in refuses at
// load come back as load failures, not errors.
func TestLoadFailures(t *testing.T) {
	m := loadModel(t, "ranker")
	oom := run(t, Trial{Model: m, Batching: batching(2048, 0, 1, 10), Load: Load{Concurrency: 8}})
	if !oom.LoadFailed || !oom.OOM || oom.Requests != 0 {
		t.Errorf("max_batch_size 2048 on 16 GiB: %+v, want an OOM load failure", oom)
	}
	bad := batching(8, 0, 1, 10)
	bad.AllowedBatchSizes = []int64{2, 4}
	inv := run(t, Trial{Model: m, Batching: bad, Load: Load{Concurrency: 8}})
	if !inv.LoadFailed || inv.OOM || inv.Reason == "" {
		t.Errorf("allowed_batch_sizes not ending at max_batch_size: %+v, want a load failure with a reason", inv)
	}
}

// TestOpenLoop checks an open loop below capacity keeps its rate, and one
// far above it falls behind with latency counted from the intended times.
func TestOpenLoop(t *testing.T) {
	m := loadModel(t, "ranker")
	light := run(t, Trial{Model: m, Batching: batching(16, 1000, 2, 64), GRPCMaxThreads: 256, Load: Load{Rate: 500}, Seed: 1})
	if math.Abs(light.SentRate-500) > 10 || math.Abs(light.QPS-500) > 15 || light.OfferedRate != 500 {
		t.Errorf("at 500/s: sent %.1f/s, answered %.1f/s", light.SentRate, light.QPS)
	}
	heavy := run(t, Trial{Model: m, Batching: batching(16, 1000, 2, 1000), GRPCMaxThreads: 256, Load: Load{Rate: 20000, MaxWorkers: 100000}, Seed: 1})
	if heavy.QPS > 10000 || heavy.Latency.P99 < time.Second {
		t.Errorf("at 20000/s: answered %.1f/s, P99 %s; want far below the rate and a P99 that grows past 1s", heavy.QPS, heavy.Latency.P99)
	}
	poisson := run(t, Trial{Model: m, Batching: batching(16, 1000, 2, 64), GRPCMaxThreads: 256, Load: Load{Rate: 500, Poisson: true}, Seed: 1})
	if math.Abs(poisson.SentRate-500) > 40 {
		t.Errorf("Poisson at 500/s: sent %.1f/s", poisson.SentRate)
	}
}

// TestCPUModelContention checks the CPU model's host work is what limits
// it: more clients than the cores can serve leave throughput bounded by
// the calibrated work per batch on two cores.
func TestCPUModelContention(t *testing.T) {
	cal := testCalibration()
	cal.Model, cal.Device = "mlp", "cpu"
	cal.Serving, cal.Noise = ServingCosts{}, Noise{}
	for i := range cal.Host {
		for j := range cal.Host[i].Points {
			cal.Host[i].Points[j].AfterCPUus, cal.Host[i].Points[j].AfterWallUS = 0, 0
		}
	}
	// Batches of one row cost 20 + 30 µs of single-threaded work; with two
	// batch threads and two inter-op threads both cores are busy: 40000/s.
	r := run(t, Trial{Model: loadModel(t, "mlp"), Batching: batching(1, 0, 2, 64), IntraOp: 1, InterOp: 2, Load: Load{Concurrency: 16}, Calibration: cal, Seed: 1})
	if math.Abs(r.QPS-40000)/40000 > 0.02 || r.CPUUtil < 0.98 {
		t.Errorf("QPS %.0f at %.2f of the cores, want 40000 ± 2%% with the cores full", r.QPS, r.CPUUtil)
	}
	// One inter-op thread: one batch at a time, one core: 20000/s.
	r = run(t, Trial{Model: loadModel(t, "mlp"), Batching: batching(1, 0, 2, 64), IntraOp: 1, InterOp: 1, Load: Load{Concurrency: 16}, Calibration: cal, Seed: 1})
	if math.Abs(r.QPS-20000)/20000 > 0.02 {
		t.Errorf("one inter-op thread: QPS %.0f, want 20000 ± 2%%", r.QPS)
	}
}

// TestTrialErrors checks trials that cannot be simulated name the field.
func TestTrialErrors(t *testing.T) {
	m := loadModel(t, "ranker")
	cpuCal := testCalibration()
	cpuCal.Device = "cpu"
	tests := []struct {
		name string
		tr   Trial
		want error
	}{
		// Without a calibration nothing can be priced.
		{"no calibration", Trial{Model: m, Load: Load{Concurrency: 1}}, ErrTrial},
		// A load needs a concurrency or a rate.
		{"no load", Trial{Model: m, Calibration: testCalibration()}, ErrTrial},
		// Not both.
		{"both loads", Trial{Model: m, Load: Load{Concurrency: 1, Rate: 5}, Calibration: testCalibration()}, ErrTrial},
		// A CPU calibration cannot price an accelerator model.
		{"device mismatch", Trial{Model: m, Load: Load{Concurrency: 1}, Calibration: cpuCal}, ErrTrial},
		// Intra-op threads the calibration never measured.
		{"unmeasured intra", Trial{Model: m, Load: Load{Concurrency: 1}, IntraOp: 8, Calibration: testCalibration()}, ErrCalibration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.tr)
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}

// TestCancel checks a cancelled context stops a simulation.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Trial{Model: loadModel(t, "ranker"), Batching: batching(8, 0, 1, 10), Load: Load{Concurrency: 64}, Calibration: testCalibration()})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}
