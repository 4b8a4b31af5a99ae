package tuner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// The fakes here stand in for a TF Serving and the probe so that the
// tuner's lifecycle can be driven through every unhappy path quickly and
// deterministically. The real parts are tested against the stand-in in
// e2e_test.go.

// fakeRuntime starts fakeServers; its behaviour per launch is scripted.
// It runs one server per slot (runtime.Concurrent); with nodes set, slot i
// runs on nodes[i%len(nodes)] unless the launch pins a node, and its
// servers are runtime.Placed.
type fakeRuntime struct {
	mu        sync.Mutex
	recovered bool
	restored  int
	started   []runtime.Config
	running   map[int]*fakeServer
	live      int // servers running now
	peak      int // most servers that ran at once
	nodes     []string
	// startErr, when set, is returned by Start for a launch.
	startErr func(runtime.Config) error
	// dieAfter, when set and positive for a launch, ends its server on its
	// own after that long with exit code 1 and a log.
	dieAfter func(runtime.Config) time.Duration
}

var _ runtime.Concurrent = (*fakeRuntime)(nil)

func (r *fakeRuntime) Recover(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recovered = true
	return nil
}

func (r *fakeRuntime) Start(ctx context.Context, cfg runtime.Config) (runtime.Server, error) {
	return r.StartSlot(ctx, 0, cfg)
}

func (r *fakeRuntime) StartSlot(_ context.Context, slot int, cfg runtime.Config) (runtime.Server, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.recovered {
		return nil, runtime.ErrNotRecovered
	}
	if s := r.running[slot]; s != nil && !s.ended() {
		return nil, fmt.Errorf("fake: Start while trial %d still runs in slot %d", len(r.started), slot)
	}
	if r.startErr != nil {
		if err := r.startErr(cfg); err != nil {
			return nil, err
		}
	}
	r.started = append(r.started, cfg)
	ep := fmt.Sprintf("fake:%d", len(r.started))
	node := cfg.Node
	if node == "" && len(r.nodes) > 0 {
		node = r.nodes[slot%len(r.nodes)]
	}
	if node != "" {
		ep += "@" + node
	}
	s := &fakeServer{cfg: cfg, ep: runtime.Endpoints{GRPC: ep}, done: make(chan struct{})}
	if r.running == nil {
		r.running = map[int]*fakeServer{}
	}
	r.running[slot] = s
	r.live++
	r.peak = max(r.peak, r.live)
	go func() {
		<-s.done
		r.mu.Lock()
		r.live--
		r.mu.Unlock()
	}()
	if r.dieAfter != nil {
		if d := r.dieAfter(cfg); d > 0 {
			time.AfterFunc(d, func() {
				s.end(runtime.Exit{Code: 1, Log: "loading model\nResource exhausted: OOM when allocating tensor"})
			})
		}
	}
	if node != "" {
		return placedServer{s, node}, nil
	}
	return s, nil
}

func (r *fakeRuntime) Restore(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.running {
		s.end(runtime.Exit{Stopped: true})
	}
	r.restored++
	return nil
}

// placedServer is a fakeServer that knows its node.
type placedServer struct {
	*fakeServer
	node string
}

func (s placedServer) Node() string { return s.node }

func (r *fakeRuntime) launches() []runtime.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runtime.Config(nil), r.started...)
}

type fakeServer struct {
	cfg  runtime.Config
	ep   runtime.Endpoints
	once sync.Once
	mu   sync.Mutex
	exit runtime.Exit
	done chan struct{}
}

func (s *fakeServer) Endpoints() runtime.Endpoints { return s.ep }
func (s *fakeServer) Done() <-chan struct{}        { return s.done }
func (s *fakeServer) Exit() runtime.Exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exit
}
func (s *fakeServer) Stop(context.Context) error {
	s.end(runtime.Exit{Stopped: true, Log: "stopped"})
	return nil
}
func (s *fakeServer) end(e runtime.Exit) {
	s.once.Do(func() {
		s.mu.Lock()
		s.exit = e
		s.mu.Unlock()
		close(s.done)
	})
}
func (s *fakeServer) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// fakeProber answers with a result computed from the running launch's
// batching.config. It finds the launch through the runtime by endpoint.
type fakeProber struct {
	rt *fakeRuntime
	// surface gives QPS and P99 for a batching config; nil means a fixed one.
	surface func(b configs.Batching) (qps float64, p99 time.Duration)
	// hook, when set, runs in the measuring phase with the trial's context;
	// returning an error fails the measurement with it.
	hook func(ctx context.Context, n int) error
	// notReady makes readiness fail for a launch.
	notReady func(b configs.Batching) bool
	// scale, when set, multiplies the throughput measured at an endpoint
	// (a slower node).
	scale func(ep runtime.Endpoints) float64
	// genLimit, when set, is the rate (a multiple of the configuration's
	// capacity) from which a capacity trial's load generator cannot offer
	// its steps.
	genLimit float64

	mu    sync.Mutex
	calls int
	bars  []float64 // each measured call's stopBelow, in call order
}

var _ Prober = (*fakeProber)(nil)

func (p *fakeProber) Trial(ctx context.Context, ep runtime.Endpoints, stopBelow float64, phase func(store.TrialState)) (*probe.Result, error) {
	launches := p.rt.launches()
	var n int
	fmt.Sscanf(strings.TrimPrefix(ep.GRPC, "fake:"), "%d", &n)
	cfg := launches[n-1]
	bp, err := configs.DecodeBatching(cfg.Batching)
	if err != nil {
		return nil, err
	}
	b := configs.Resolve(bp, 2)
	if p.notReady != nil && p.notReady(b) {
		return nil, &probe.ReadyError{Reason: probe.ReadyReason("timeout"), Detail: "model never became AVAILABLE"}
	}
	p.mu.Lock()
	p.calls++
	call := p.calls
	p.bars = append(p.bars, stopBelow)
	p.mu.Unlock()
	phase(store.TrialWarming)
	phase(store.TrialMeasuring)
	if p.hook != nil {
		if err := p.hook(ctx, call); err != nil {
			return nil, err
		}
	}
	if ctx.Err() != nil {
		return &probe.Result{Valid: false, InvalidReason: "cancelled", StopReason: probe.StopCancelled}, nil
	}
	qps, p99 := 100.0, 10*time.Millisecond
	if p.surface != nil {
		qps, p99 = p.surface(b)
	}
	if p.scale != nil {
		qps *= p.scale(ep)
	}
	return &probe.Result{
		Valid: true, StopReason: probe.StopStable, QPS: qps, OK: int64(qps * 5), Requests: int64(qps * 5),
		Latency: probe.Percentiles{Count: int64(qps * 5), P50: p99 / 2, P90: p99 * 8 / 10, P95: p99 * 9 / 10, P99: p99, P999: p99 * 2, Max: p99 * 3},
		Server:  probe.ServerMetrics{MeanBatchSize: float64(b.MaxBatchSize) / 2, QueuingShare: 0.2},
	}, nil
}

// testStudy is a small valid study over a grid of max_batch_size ×
// batch_timeout_micros, with the given overrides appended.
func testStudy(t *testing.T, extra string) *configs.Study {
	t.Helper()
	return parseTestStudy(t, testStudyDoc+extra)
}

// testStudyDoc is testStudy's document.
const testStudyDoc = `name: fake
target:
  runtime: process
  model: {name: m, base_path: /models/m}
  process: {binary: /bin/true}
load:
  mode: closed
  concurrency: 8
slo:
  latency: 30ms
objective: max_throughput
space:
  max_batch_size: {values: [1, 8, 32, 64]}
  batch_timeout_micros: {values: [0, 2000, 9000]}
search:
  strategy: grid
  trials: 12
  seed: 1
confirmation:
  top_k: 2
  repeats: 3
`

// parseTestStudy parses doc as a study file in a temporary directory, so
// that the paths it leaves relative (the export's default among them) land
// there and not in the source tree.
func parseTestStudy(t *testing.T, doc string) *configs.Study {
	t.Helper()
	s, err := configs.ParseStudy(filepath.Join(t.TempDir(), "fake.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// surface: throughput grows with batch size; P99 grows with the timeout
// and with batch size, so the best feasible point under a 30 ms SLO is
// max_batch_size 32 with timeout 2000 (P99 = 4 + 0.5*32 + 2 = 22 ms; 64
// reaches 38 ms and breaks the SLO).
func testSurface(b configs.Batching) (float64, time.Duration) {
	qps := 100 * float64(b.MaxBatchSize) / (1 + float64(b.MaxBatchSize)/64)
	qps *= 1 + float64(b.BatchTimeoutMicros)/20000
	p99 := 4*time.Millisecond + time.Duration(b.MaxBatchSize)*500*time.Microsecond + time.Duration(b.BatchTimeoutMicros)*time.Microsecond
	return qps, p99
}
