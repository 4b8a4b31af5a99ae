package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator"
	"github.com/batchtune/batchtune/emulator/device"
	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sched"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/tfserving"
)

// DefaultMaxWorkers bounds open-loop requests in flight when Load leaves
// it unset, as the probe's default does.
const DefaultMaxWorkers = 4096

// Defaults of a Trial's timing.
const (
	DefaultWarmup   = 3 * time.Second
	DefaultDuration = 10 * time.Second
)

// Load is the simulated client population: closed loop (Concurrency > 0)
// or open loop (Rate > 0), never both.
type Load struct {
	// Concurrency is the number of requests kept in flight: each client
	// sends its next request as soon as its last one is answered, failed
	// or not.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate is the offered rate in requests per second, evenly spaced or
	// Poisson; latency counts from each request's intended send time.
	Rate    float64 `json:"rate,omitempty"`
	Poisson bool    `json:"poisson,omitempty"`
	// MaxWorkers bounds open-loop requests in flight (DefaultMaxWorkers
	// when 0); a request due at the bound waits for a worker.
	MaxWorkers int `json:"max_workers,omitempty"`
}

// Trial is one simulated stand-in trial: a model, a batching config and
// server flags, a load, and the calibration that prices host work.
type Trial struct {
	// Model is the model's description (model.Load(...).Desc).
	Model model.Description
	// Batching is the batching.config; nil runs with TF's defaults
	// (--enable_batching without a parameters file).
	Batching *tfserving.BatchingParameters
	// IntraOp and InterOp are --tensorflow_intra_op_parallelism and
	// --tensorflow_inter_op_parallelism (0: auto, one per core).
	IntraOp, InterOp int
	// GRPCMaxThreads is --grpc_max_threads (0: TF's 4 × cores): the most
	// requests the server handles at once; more wait for a thread.
	GRPCMaxThreads int
	// Load is the client population.
	Load Load
	// Warmup is simulated before measuring (DefaultWarmup when 0), so
	// cold batch sizes are paid for outside the figures; Duration is the
	// measured time (DefaultDuration when 0).
	Warmup, Duration time.Duration
	// Calibration prices host work; its Cores is the machine's.
	Calibration *Calibration
	// Seed seeds the device jitter, the host-work noise and Poisson
	// arrivals: repeats of a trial take different seeds.
	Seed uint64
}

// Result is what a probe would have measured, with the probe's
// definitions: QPS counts successful answers per second of the measured
// period, ErrorRate the failed share of completed requests, Latency the
// successful ones (from the intended send time in open loop).
type Result struct {
	// LoadFailed: the server would not have come up, Reason says why;
	// OOM: because the largest batch does not fit device memory.
	LoadFailed bool   `json:"load_failed,omitempty"`
	OOM        bool   `json:"oom,omitempty"`
	Reason     string `json:"reason,omitempty"`

	Duration  time.Duration     `json:"duration_ns"`
	Requests  int64             `json:"requests"`
	OK        int64             `json:"ok"`
	Errors    map[string]int64  `json:"errors,omitempty"`
	ErrorRate float64           `json:"error_rate"`
	QPS       float64           `json:"qps"`
	Latency   probe.Percentiles `json:"latency"`
	// OfferedRate and SentRate are the open loop's target and the rate
	// requests were sent at.
	OfferedRate float64 `json:"offered_rate,omitempty"`
	SentRate    float64 `json:"sent_rate,omitempty"`

	// Batches executed in the measured period, their mean padded size
	// (TF's processed_batch_size) and the mean time tasks queued.
	Batches   int64         `json:"batches"`
	MeanBatch float64       `json:"mean_batch"`
	MeanQueue time.Duration `json:"mean_queue_ns"`
	// CPUUtil is the share of the cores busy over the measured period.
	CPUUtil float64 `json:"cpu_util"`
	// Events is how many virtual-time events the simulation ran.
	Events int `json:"events"`
}

// Run simulates t in virtual time and returns what it measured. A
// configuration the stand-in would refuse to load comes back as a Result
// with LoadFailed set, not an error; errors are for trials that cannot be
// simulated (wrapping ErrTrial or ErrCalibration). ctx is checked between
// simulated milliseconds.
func Run(ctx context.Context, t Trial) (*Result, error) {
	s, res, err := newSimulation(t)
	if err != nil || res != nil {
		return res, err
	}
	return s.run(ctx)
}

// simulation is one trial's state, driven by one clock's event loop.
type simulation struct {
	t      Trial
	cal    *Calibration
	clk    *sched.Virtual
	cpu    *Processor
	inter  *gate
	grpc   *gate
	sch    *sched.Scheduler
	acc    *device.Accelerator // nil for the CPU model
	curve  *HostCurve
	rng    *rand.Rand
	speed  float64 // the run's host speed factor (work multiplier)
	jobSig float64 // lognormal σ of one job's work
	start  time.Time
	from   time.Time // measurement start
	end    time.Time

	measuring bool
	hist      *hdrhistogram.Histogram
	requests  int64
	ok        int64
	errs      map[string]int64
	sent      int64
	batches   int64
	rows      int64
	queued    time.Duration
	queuedN   int64
	busyFrom  time.Duration

	// open loop
	inFlight int
	waiting  []time.Time // intended times of requests waiting for a worker
	events   int
}

func newSimulation(t Trial) (*simulation, *Result, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrTrial, field, fmt.Sprintf(format, args...))
	}
	if t.Calibration == nil {
		return nil, nil, bad("calibration", "is required")
	}
	cal := t.Calibration
	if err := cal.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCalibration, err)
	}
	if cal.Device != t.Model.Device {
		return nil, nil, bad("calibration.device", "calibrated for a %s model, the trial's model runs on %s", cal.Device, t.Model.Device)
	}
	switch l := t.Load; {
	case l.Concurrency > 0 && l.Rate > 0:
		return nil, nil, bad("load", "give a concurrency (closed loop) or a rate (open loop), not both")
	case l.Concurrency < 0 || l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.MaxWorkers < 0:
		return nil, nil, bad("load", "concurrency, rate and max_workers must not be negative, got %d, %v, %d", l.Concurrency, l.Rate, l.MaxWorkers)
	case l.Concurrency == 0 && l.Rate == 0:
		return nil, nil, bad("load", "needs a concurrency or a rate")
	}
	if t.Warmup < 0 || t.Duration < 0 {
		return nil, nil, bad("warmup", "warmup and duration must not be negative, got %s and %s", t.Warmup, t.Duration)
	}
	if t.Warmup == 0 {
		t.Warmup = DefaultWarmup
	}
	if t.Duration == 0 {
		t.Duration = DefaultDuration
	}
	cores := cal.Cores
	intra, inter := t.IntraOp, t.InterOp
	if intra <= 0 {
		intra = cores
	}
	if inter <= 0 {
		inter = cores
	}
	curve, ok := cal.curve(intra)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no host work measured at %d intra-op threads (measured: %v)", ErrCalibration, intra, cal.Intras())
	}
	grpcThreads := t.GRPCMaxThreads
	if grpcThreads <= 0 {
		grpcThreads = 4 * cores
	}

	// The load-time checks the stand-in makes, in its order.
	params := t.Batching
	if params == nil {
		params = &tfserving.BatchingParameters{}
	}
	if err := configs.ValidateBatching(params); err != nil {
		return nil, &Result{LoadFailed: true, Reason: err.Error()}, nil
	}
	opts := emulator.SchedOptions(params, cores)
	if err := opts.Validate(); err != nil {
		return nil, &Result{LoadFailed: true, Reason: err.Error()}, nil
	}
	largest := opts.MaxBatchSize
	if opts.EnableLargeBatchSplitting {
		largest = opts.MaxExecutionBatchSize
	}

	rng := rand.New(rand.NewPCG(t.Seed, 0x5171a1))
	start := time.Unix(0, 0)
	clk := sched.NewVirtual(start)
	s := &simulation{
		t: t, cal: cal, clk: clk, cpu: cal.processor(clk),
		inter: newGate(inter), grpc: newGate(grpcThreads), curve: curve, rng: rng,
		speed: math.Exp(cal.Noise.RunSigma * rng.NormFloat64()),
		start: start, from: start.Add(t.Warmup), end: start.Add(t.Warmup + t.Duration),
		errs: map[string]int64{},
	}
	if cv := cal.Noise.JobCV; cv > 0 {
		s.jobSig = math.Sqrt(math.Log1p(cv * cv))
	}
	switch t.Model.Device {
	case model.Accelerator:
		spec := t.Model.Accelerator
		if spec == nil {
			return nil, nil, bad("model.accelerator", "is required for an accelerator model")
		}
		if largest > spec.MaxRows() {
			return nil, &Result{LoadFailed: true, OOM: true, Reason: fmt.Sprintf("max_batch_size %d does not fit the device memory (largest batch that fits: %d)", largest, spec.MaxRows())}, nil
		}
		// Only Reserve is used: the device's in-order queue, jitter and
		// cold starts, with no host runtime behind it.
		s.acc = device.NewAccelerator(*spec, t.Model.Host, t.Model.Features(), t.Model.Outputs(), nil, clk, rng.Uint64())
	case model.CPU:
	default:
		return nil, nil, bad("model.device", "must be %s or %s, got %q", model.Accelerator, model.CPU, t.Model.Device)
	}
	sc, err := sched.New(clk, sched.ExecutorFunc(s.execute), opts)
	if err != nil {
		return nil, &Result{LoadFailed: true, Reason: err.Error()}, nil
	}
	s.sch = sc
	if s.hist = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3); s.hist == nil {
		return nil, nil, errors.New("sim: cannot make a latency histogram")
	}
	return s, nil, nil
}

// cost turns calibrated core-time into one job's work: the run's speed
// factor times a lognormal draw with mean 1.
func (s *simulation) cost(d time.Duration) time.Duration {
	f := s.speed
	if s.jobSig > 0 {
		f *= math.Exp(s.jobSig*s.rng.NormFloat64() - s.jobSig*s.jobSig/2)
	}
	return time.Duration(float64(d) * f)
}

func us(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// execute is the batch executor: what the stand-in's batch goroutine does,
// each piece of host work a processor job, the device time from the
// accelerator's own Reserve.
func (s *simulation) execute(b *sched.Batch, done func(error)) {
	if s.measuring {
		s.batches++
		s.rows += int64(b.Padded)
		for _, p := range b.Pieces {
			if p.Offset == 0 {
				s.queued += b.Started.Sub(p.Task.Enqueued())
				s.queuedN++
			}
		}
	}
	main, after := s.curve.hostWork(b.Padded, s.cal.Cores)
	s.cpu.Run(s.cost(us(s.cal.Serving.BatchCPUus)), 1, func() {
		s.inter.acquire(func() {
			s.cpu.Run(s.cost(main.cpu), main.par, func() {
				s.inter.release()
				if s.acc == nil {
					done(nil)
					return
				}
				_, end := s.acc.Reserve(s.clk.Now(), b.Padded)
				s.clk.AfterFunc(end.Sub(s.clk.Now()), func() {
					s.inter.acquire(func() {
						s.cpu.Run(s.cost(after.cpu), after.par, func() {
							s.inter.release()
							done(nil)
						})
					})
				})
			})
		})
	})
}

// request carries one request through the client and the server. The
// client's and the server's CPU work on each side of the batch queue run
// back to back on one thread of each, which processor sharing prices the
// same as one job of their sum: so one job before the task is submitted
// (the client builds and sends, the server reads and decodes) and one
// after it is done (the server encodes and writes, the client reads). The
// request's wall-time delay comes first, then a gRPC server thread is
// taken for the rest. intended is when the request was due (open loop);
// in closed loop it is the send, after the client's share of the work.
func (s *simulation) request(intended time.Time, closed bool, finished func()) {
	sv := s.cal.Serving
	pre := s.cost(us((sv.ClientCPUus + sv.RequestCPUus) / 2))
	post := s.cost(us((sv.ClientCPUus + sv.RequestCPUus) / 2))
	if closed {
		// The send is stamped after the client's half of the work, whose
		// expected share of pre is client/(client+server).
		intended = s.clk.Now()
		if tot := sv.ClientCPUus + sv.RequestCPUus; tot > 0 {
			intended = intended.Add(time.Duration(float64(pre) * sv.ClientCPUus / tot))
		}
	}
	if s.measuring && s.clk.Now().Before(s.end) {
		s.sent++
	}
	reply := func(err error) {
		s.cpu.Run(post, 1, func() {
			s.grpc.release()
			s.record(intended, err)
			finished()
		})
	}
	s.clk.AfterFunc(us(sv.DelayUS), func() {
		s.grpc.acquire(func() {
			s.cpu.Run(pre, 1, func() {
				task := &sched.Task{Size: 1}
				task.Done = reply
				if err := s.sch.Submit(task); err != nil {
					reply(err)
				}
			})
		})
	})
}

// record counts a completed request if it completed in the measured
// period.
func (s *simulation) record(intended time.Time, err error) {
	now := s.clk.Now()
	if !s.measuring || now.After(s.end) {
		return
	}
	s.requests++
	if err != nil {
		s.errs[codeOf(err).String()]++
		return
	}
	s.ok++
	_ = s.hist.RecordValue(max(1, now.Sub(intended).Microseconds()))
}

// codeOf maps a scheduler error to the gRPC code the stand-in answers.
func codeOf(err error) codes.Code {
	var se *sched.SizeError
	switch {
	case errors.As(err, &se):
		return codes.InvalidArgument
	case errors.Is(err, sched.ErrQueueFull), errors.Is(err, sched.ErrClosed):
		return codes.Unavailable
	case errors.Is(err, sched.ErrExpired):
		return codes.ResourceExhausted
	}
	return codes.Internal
}

func (s *simulation) run(ctx context.Context) (*Result, error) {
	t := s.t
	if n := t.Load.Concurrency; n > 0 {
		var client func()
		client = func() { s.request(time.Time{}, true, client) }
		for range n {
			s.clk.AfterFunc(0, client)
		}
	} else {
		s.openLoop()
	}
	s.clk.AfterFunc(t.Warmup, func() {
		s.measuring = true
		s.busyFrom = s.cpu.Busy()
	})
	for {
		next, ok := s.clk.Next()
		if !ok || next.After(s.end) {
			break
		}
		// Check for cancellation once per simulated millisecond of events.
		if s.events%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		s.clk.Step()
		s.events++
	}
	s.clk.RunUntil(s.end)
	return s.result(), nil
}

// openLoop schedules arrivals at their intended times; each takes a worker
// (up to the bound) or waits for one.
func (s *simulation) openLoop() {
	l := s.t.Load
	bound := l.MaxWorkers
	if bound == 0 {
		bound = DefaultMaxWorkers
	}
	var finished func()
	finished = func() {
		s.inFlight--
		if len(s.waiting) > 0 {
			at := s.waiting[0]
			s.waiting = s.waiting[1:]
			s.inFlight++
			s.request(at, false, finished)
		}
	}
	gap := func() time.Duration {
		if l.Poisson {
			return time.Duration(s.rng.ExpFloat64() / l.Rate * float64(time.Second))
		}
		return time.Duration(float64(time.Second) / l.Rate)
	}
	var n int64
	var arrive func()
	at := s.start
	arrive = func() {
		n++
		intended := at
		if s.inFlight < bound {
			s.inFlight++
			s.request(intended, false, finished)
		} else {
			s.waiting = append(s.waiting, intended)
		}
		if l.Poisson {
			at = at.Add(gap())
		} else {
			at = s.start.Add(time.Duration(float64(n) / l.Rate * float64(time.Second)))
		}
		if !at.After(s.end) {
			s.clk.AfterFunc(at.Sub(s.clk.Now()), arrive)
		}
	}
	s.clk.AfterFunc(0, arrive)
}

func (s *simulation) result() *Result {
	d := s.t.Duration
	r := &Result{
		Duration: d, Requests: s.requests, OK: s.ok, QPS: float64(s.ok) / d.Seconds(),
		Batches: s.batches, Events: s.events,
	}
	if len(s.errs) > 0 {
		r.Errors = s.errs
	}
	if s.requests > 0 {
		r.ErrorRate = float64(s.requests-s.ok) / float64(s.requests)
	}
	if s.batches > 0 {
		r.MeanBatch = float64(s.rows) / float64(s.batches)
	}
	if s.queuedN > 0 {
		r.MeanQueue = s.queued / time.Duration(s.queuedN)
	}
	r.CPUUtil = float64(s.cpu.Busy()-s.busyFrom) / float64(d) / float64(s.cal.Cores)
	if s.t.Load.Rate > 0 {
		r.OfferedRate = s.t.Load.Rate
		r.SentRate = float64(s.sent) / d.Seconds()
	}
	r.Latency = probe.PercentilesOf(s.hist)
	return r
}
