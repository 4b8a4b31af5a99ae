package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/sched"
)

// CalibrationFormat is the format value of a calibration file.
const CalibrationFormat = "batchtune-sim-calibration/1"

// Calibration is what a simulated trial charges for the work the
// stand-in does on the host CPU, measured on one machine for one model.
// Device time is not in it: the accelerator's comes from its stated cost
// model (device.AcceleratorSpec), in the simulation as in the stand-in.
// It is written as JSON (Encode, LoadCalibration).
type Calibration struct {
	Format string `json:"format"`
	// Model is the model directory's name (ranker, mlp) and Device its
	// device kind (accelerator, cpu).
	Model  string `json:"model"`
	Device string `json:"device"`
	// Cores is the number of cores the measurements were taken on (and
	// the stand-in's GOMAXPROCS).
	Cores int `json:"cores"`
	// Source says how and when the calibration was measured (command,
	// date, load average), so a reader can repeat it.
	Source string `json:"source"`

	// Host is the host work of one batch, by intra-op thread count.
	Host []HostCurve `json:"host"`
	// Contention is the same work measured with several executions at
	// once, kept to check the processor-sharing model (CheckContention);
	// a trial does not read it.
	Contention []ContentionSample `json:"contention,omitempty"`
	// Serving is the per-request and per-batch work outside the device
	// model, fitted from real stand-in runs (FitServing).
	Serving ServingCosts `json:"serving"`
	// Noise is the variation a simulated trial draws.
	Noise Noise `json:"noise"`
	// Scheduling is how the cores are shared between pieces of work.
	Scheduling Scheduling `json:"scheduling"`
}

// Scheduling says how a simulation shares the cores.
type Scheduling struct {
	// Discipline is "ps" (processor sharing: every piece of work in
	// progress gets an equal share, up to its parallelism) or "rr"
	// (round robin: first come first served on the cores, each thread
	// for at most QuantumUS before it queues again, as the Go runtime
	// runs goroutines). Empty means "ps".
	Discipline string  `json:"discipline,omitempty"`
	QuantumUS  float64 `json:"quantum_us,omitempty"`
}

// processor returns the Processor the calibration's scheduling describes.
func (c *Calibration) processor(clk *sched.Virtual) *Processor {
	if c.Scheduling.Discipline == "rr" {
		return NewRoundRobin(clk, c.Cores, us(c.Scheduling.QuantumUS))
	}
	return NewProcessor(clk, float64(c.Cores))
}

// HostCurve is the host work of a batch by rows at one intra-op thread
// count, measured with one execution at a time.
type HostCurve struct {
	Intra  int         `json:"intra"`
	Points []HostPoint `json:"points"`
}

// HostPoint is one batch size's host work. For the CPU model, Main is the
// whole forward pass; for the accelerator, Main is the preprocessing done
// before the device runs and After the output projection done after it.
// Each holds an inter-op thread. CPU is core-time (every thread of the
// process, spinning included), Wall the elapsed time of one execution
// alone; their ratio is the parallelism the work achieved.
type HostPoint struct {
	Rows        int     `json:"rows"`
	MainCPUus   float64 `json:"main_cpu_us"`
	MainWallUS  float64 `json:"main_wall_us"`
	AfterCPUus  float64 `json:"after_cpu_us,omitempty"`
	AfterWallUS float64 `json:"after_wall_us,omitempty"`
	// CV is the coefficient of variation of one execution's wall time.
	CV float64 `json:"cv"`
}

// ContentionSample is a batch's host work measured with K executions at
// once sharing one runtime (intra-op pool and K inter-op threads), as K
// busy batch threads run in the stand-in.
type ContentionSample struct {
	Intra  int     `json:"intra"`
	Rows   int     `json:"rows"`
	K      int     `json:"k"`
	WallUS float64 `json:"wall_us"` // per execution and thread: elapsed × K / executions
	CPUus  float64 `json:"cpu_us"`  // core-time per execution
}

// ServingCosts is the CPU work of serving a request outside the device
// model, fitted from real runs of the stand-in measured by the probe.
type ServingCosts struct {
	// RequestCPUus is the server's core-time per request (gRPC, tensor
	// decoding, answer encoding, metrics), half charged before the task
	// is submitted and half after it is done, like ClientCPUus.
	RequestCPUus float64 `json:"request_cpu_us"`
	// BatchCPUus is the server's core-time per batch outside the model
	// (merging rows, splitting outputs, the batch goroutine).
	BatchCPUus float64 `json:"batch_cpu_us"`
	// ClientCPUus is the load generator's core-time per request. The
	// probe runs on the same machine in every study here, so it takes
	// cores from the server: half before a request is sent, half when its
	// answer is read.
	ClientCPUus float64 `json:"client_cpu_us"`
	// DelayUS is wall time per request that holds no core: the loopback
	// network and the thread wake-ups between the client, the gRPC
	// server and the batch threads.
	DelayUS float64 `json:"delay_us"`
	// Fit says what the figures were fitted from.
	Fit string `json:"fit,omitempty"`
}

// Noise is the variation a simulated trial draws on top of the device
// model's own jitter.
type Noise struct {
	// RunSigma is the standard deviation of the log of a per-trial speed
	// factor on all host work: machines drift between runs.
	RunSigma float64 `json:"run_sigma"`
	// JobCV is the coefficient of variation of one piece of host work
	// (a gamma draw with mean 1 multiplies it).
	JobCV float64 `json:"job_cv"`
}

// Validate reports every problem with c, with field paths.
func (c *Calibration) Validate() error {
	var ps configs.Problems
	if c.Format != CalibrationFormat {
		ps.Add("format", "must be %q, got %q", CalibrationFormat, c.Format)
	}
	if c.Model == "" {
		ps.Add("model", "must not be empty")
	}
	if c.Device != "accelerator" && c.Device != "cpu" {
		ps.Add("device", "must be accelerator or cpu, got %q", c.Device)
	}
	if c.Cores < 1 {
		ps.Add("cores", "must be at least 1, got %d", c.Cores)
	}
	if len(c.Host) == 0 {
		ps.Add("host", "must hold at least one intra-op thread count")
	}
	seen := map[int]bool{}
	for i, h := range c.Host {
		f := "host[" + strconv.Itoa(i) + "]"
		if h.Intra < 1 {
			ps.Add(f+".intra", "must be at least 1, got %d", h.Intra)
		}
		if seen[h.Intra] {
			ps.Add(f+".intra", "%d is listed twice", h.Intra)
		}
		seen[h.Intra] = true
		if len(h.Points) == 0 {
			ps.Add(f+".points", "must hold at least one batch size")
		}
		for j, p := range h.Points {
			pf := f + ".points[" + strconv.Itoa(j) + "]"
			if p.Rows < 1 || (j > 0 && p.Rows <= h.Points[j-1].Rows) {
				ps.Add(pf+".rows", "must be positive and increasing, got %d", p.Rows)
			}
			for _, v := range []struct {
				name string
				v    float64
			}{{"main_cpu_us", p.MainCPUus}, {"main_wall_us", p.MainWallUS}, {"after_cpu_us", p.AfterCPUus}, {"after_wall_us", p.AfterWallUS}, {"cv", p.CV}} {
				if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
					ps.Add(pf+"."+v.name, "must be finite and non-negative, got %v", v.v)
				}
			}
			if p.MainWallUS <= 0 {
				ps.Add(pf+".main_wall_us", "must be positive, got %v", p.MainWallUS)
			}
		}
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"serving.request_cpu_us", c.Serving.RequestCPUus}, {"serving.batch_cpu_us", c.Serving.BatchCPUus},
		{"serving.client_cpu_us", c.Serving.ClientCPUus}, {"serving.delay_us", c.Serving.DelayUS}, {"noise.run_sigma", c.Noise.RunSigma}, {"noise.job_cv", c.Noise.JobCV}} {
		if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			ps.Add(v.name, "must be finite and non-negative, got %v", v.v)
		}
	}
	switch c.Scheduling.Discipline {
	case "", "ps":
	case "rr":
		if !(c.Scheduling.QuantumUS > 0) || math.IsInf(c.Scheduling.QuantumUS, 0) {
			ps.Add("scheduling.quantum_us", "must be positive for round robin, got %v", c.Scheduling.QuantumUS)
		}
	default:
		ps.Add("scheduling.discipline", "must be ps or rr, got %q", c.Scheduling.Discipline)
	}
	if c.Noise.RunSigma > 1 {
		ps.Add("noise.run_sigma", "must be at most 1, got %v", c.Noise.RunSigma)
	}
	if c.Noise.JobCV > 3 {
		ps.Add("noise.job_cv", "must be at most 3, got %v", c.Noise.JobCV)
	}
	return ps.Err()
}

// curve returns the host curve measured at intra threads.
func (c *Calibration) curve(intra int) (*HostCurve, bool) {
	i := slices.IndexFunc(c.Host, func(h HostCurve) bool { return h.Intra == intra })
	if i < 0 {
		return nil, false
	}
	return &c.Host[i], true
}

// Intras lists the intra-op thread counts the calibration holds.
func (c *Calibration) Intras() []int {
	out := make([]int, len(c.Host))
	for i, h := range c.Host {
		out[i] = h.Intra
	}
	return out
}

// work is a piece of host work: core-time and the parallelism it reaches.
type work struct {
	cpu time.Duration
	par float64
}

// hostWork is the host work of a batch of rows at intra threads on cores
// cores: main and after (the accelerator's projection), each as core-time
// and the parallelism it reaches. Between measured batch sizes it
// interpolates linearly; beyond the largest it extrapolates from the last
// two (host work grows linearly with rows once the pool is busy).
//
// Main's parallelism is that of the whole execution as measured, CPU over
// wall of main and after together (the accelerator's main is measured as
// a difference of two runs, whose wall times are too small at a few rows
// to divide), between 1 and min(intra, cores); with more than one
// intra-op thread it is the running maximum over batch sizes (parallelism
// envelope): another process that held a core through a measurement shows
// as lost parallelism, and parallel efficiency does not fall as a batch
// grows (its shards only get bigger), so the best seen at a smaller size
// is the better estimate. The recorded figures stay as measured.
func (h *HostCurve) hostWork(rows, cores int) (main, after work) {
	pts := h.Points
	limit := float64(max(1, min(h.Intra, cores)))
	pars := make([]float64, len(pts))
	best := 1.0
	for i, p := range pts {
		par := 1.0
		if wall := p.MainWallUS + p.AfterWallUS; wall > 0 {
			par = (p.MainCPUus + p.AfterCPUus) / wall
		}
		par = math.Min(math.Max(par, 1), limit)
		if h.Intra > 1 {
			best = math.Max(best, par)
			par = best
		}
		pars[i] = par
	}
	at := func(f func(i int) float64) float64 {
		if len(pts) == 1 {
			return f(0) * float64(rows) / float64(pts[0].Rows)
		}
		i, _ := slices.BinarySearchFunc(pts, rows, func(p HostPoint, r int) int { return p.Rows - r })
		switch {
		case i < len(pts) && pts[i].Rows == rows:
			return f(i)
		case i == 0:
			return f(0) // below the smallest size: a batch costs at least one row's worth
		case i == len(pts):
			i = len(pts) - 1
		}
		a, b := pts[i-1], pts[i]
		t := float64(rows-a.Rows) / float64(b.Rows-a.Rows)
		return math.Max(0, f(i-1)+t*(f(i)-f(i-1)))
	}
	d := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	main = work{cpu: d(at(func(i int) float64 { return pts[i].MainCPUus })), par: 1}
	if len(pts) == 1 {
		main.par = pars[0]
	} else {
		main.par = math.Min(math.Max(at(func(i int) float64 { return pars[i] }), 1), limit)
	}
	after = work{cpu: d(at(func(i int) float64 { return pts[i].AfterCPUus })), par: 1}
	return main, after
}

// Encode writes c as indented JSON.
func (c *Calibration) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// DecodeCalibration reads and validates a calibration; name is used in
// error messages. Unknown fields are errors.
func DecodeCalibration(r io.Reader, name string) (*Calibration, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCalibration, name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Calibration
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%w: %s:%d: %w", ErrCalibration, name, lineOf(data, se.Offset), err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%w: %s:%d: %s: %w", ErrCalibration, name, lineOf(data, te.Offset), te.Field, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCalibration, name, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s:\n%w", ErrCalibration, name, err)
	}
	return &c, nil
}

func lineOf(data []byte, offset int64) int {
	return bytes.Count(data[:min(int(offset), len(data))], []byte("\n")) + 1
}

// LoadCalibration reads and validates the calibration file at path.
func LoadCalibration(path string) (*Calibration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCalibration, err)
	}
	defer f.Close()
	return DecodeCalibration(f, path)
}

// ContentionCheck compares one contention sample with what the
// processor-sharing model predicts for it.
type ContentionCheck struct {
	ContentionSample
	// PredictedUS is the wall time per execution the Processor gives k
	// executions started together, each with the host work (main, then
	// after) measured alone at this batch size and intra-op count.
	PredictedUS float64 `json:"predicted_us"`
}

// CheckContention predicts every contention sample from the executions
// measured alone, by running k of them at once on a Processor of the
// calibration's cores. It is how the processor-sharing model of
// oversubscribed threads is checked against the real device code.
func (c *Calibration) CheckContention() []ContentionCheck {
	var out []ContentionCheck
	for _, s := range c.Contention {
		h, ok := c.curve(s.Intra)
		if !ok {
			continue
		}
		main, after := h.hostWork(s.Rows, c.Cores)
		clk := sched.NewVirtual(time.Unix(0, 0))
		p := c.processor(clk)
		var total time.Duration
		for range s.K {
			p.Run(main.cpu, main.par, func() {
				p.Run(after.cpu, after.par, func() { total += clk.Now().Sub(time.Unix(0, 0)) })
			})
		}
		clk.Run(0)
		out = append(out, ContentionCheck{ContentionSample: s, PredictedUS: float64(total) / float64(s.K) / 1e3})
	}
	return out
}
