package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

// Format is the header's format value this package writes for new
// surfaces. Version 2 added max_capacity surfaces (a capacity and its
// steps per measurement); FormatV1 files are still read, and written back
// as they were.
const (
	Format   = "batchtune-surface/2"
	FormatV1 = "batchtune-surface/1"
)

// DefaultRateTolerance is the share of a min_latency surface's rate a
// measurement may fall short by and still count as achieving it: the
// tuner's (objective.RateShortfall).
const DefaultRateTolerance = objective.RateShortfall

// maxProblems bounds how many problems Decode collects before giving up.
const maxProblems = 20

// Duration is a time.Duration written in JSON as a Go duration string
// ("50ms").
type Duration time.Duration

// MarshalJSON writes d as "50ms".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"50ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Header is a surface file's first line: what was measured and under
// which study facts.
type Header struct {
	Format string `json:"format"`
	Name   string `json:"name"`
	// Source says how the surface was recorded (command, stand-in
	// version), so a reader can reproduce it.
	Source string `json:"source"`
	Model  string `json:"model,omitempty"`
	Device string `json:"device,omitempty"`

	Objective objective.Kind `json:"objective"`
	// Concurrency is the closed-loop load of a max_throughput surface.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate is the open-loop load (requests/s) of a min_latency surface.
	Rate          float64  `json:"rate,omitempty"`
	RateTolerance float64  `json:"rate_tolerance,omitempty"`
	SLO           Duration `json:"slo"`
	ErrorBudget   float64  `json:"error_budget"`
	Cores         int      `json:"cores"`
	GPUs          int      `json:"gpus"`
	// Space is the swept space; every measurement's config follows its
	// order.
	Space []configs.ParamSpec `json:"space"`
	// Fixed names server flags the sweep pinned outside the space (for
	// example grpc_max_threads), as a tuner's target flags would pin them.
	Fixed map[string]int64 `json:"fixed,omitempty"`
}

// Measurement is one measurement line: one run of one configuration.
type Measurement struct {
	Config     []int64 `json:"config"`
	QPS        float64 `json:"qps"`
	P99Micros  float64 `json:"p99_us"`
	ErrorRate  float64 `json:"error_rate"`
	LoadFailed bool    `json:"load_failed,omitempty"`
	OOM        bool    `json:"oom,omitempty"`
	// Reference marks a run recorded only to pin down the truth of a
	// contender (surfacetool refine): it counts in Truth, and a Replayer
	// never answers with it, so strategies meet the sweep's own noise.
	Reference bool `json:"reference,omitempty"`

	// Capacity (max_capacity surfaces only, format 2, required unless the
	// run failed to load) is the highest open-loop rate, in requests/s, at
	// which the run's step search met the SLO: 0 when none did. Upper is
	// the lowest rate that broke it (0: none did), so the true capacity
	// lies in [Capacity, Upper). QPS, P99Micros and ErrorRate are then the
	// step at the capacity's (the knee's), and Steps every step measured.
	Capacity *float64 `json:"capacity,omitempty"`
	Upper    float64  `json:"upper,omitempty"`
	Steps    []Step   `json:"steps,omitempty"`
}

// Step is one open-loop step of a capacity measurement.
type Step struct {
	// Rate is the offered rate and QPS the achieved one, in requests/s.
	Rate float64 `json:"rate"`
	QPS  float64 `json:"qps"`
	// P99Micros is the SLO quantile's latency in microseconds.
	P99Micros float64 `json:"p99_us"`
	ErrorRate float64 `json:"error_rate,omitempty"`
	// Meets is the step's verdict: the SLO quantile within the SLO, the
	// error rate within the budget, the rate kept.
	Meets bool `json:"meets,omitempty"`
}

// capacity is the measurement's capacity (0 when it has none).
func (m Measurement) capacity() float64 {
	if m.Capacity == nil {
		return 0
	}
	return *m.Capacity
}

// failed reports whether the server did not come up for this run.
func (m Measurement) failed() bool { return m.LoadFailed || m.OOM }

// P99 is the measurement's P99 as a duration.
func (m Measurement) P99() time.Duration {
	return time.Duration(m.P99Micros * float64(time.Microsecond))
}

// Point is one configuration with every run recorded for it.
type Point struct {
	Config search.Config
	Runs   []Measurement
}

// Truth is what a configuration's repeats say on average: the ground truth
// a benchmark scores strategies against.
type Truth struct {
	QPS       float64       `json:"qps"`
	P99       time.Duration `json:"p99"`
	ErrorRate float64       `json:"error_rate"`
	// Failed is true when any run failed to load.
	Failed bool `json:"failed"`
	// Feasible: never failed, and the means meet the SLO and error budget
	// (max_throughput) or achieve the rate within tolerance (min_latency).
	Feasible bool `json:"feasible"`
	// Value is the mean objective: QPS, P99 in seconds, or capacity in
	// requests/s (max_capacity: feasible when it is above 0).
	Value float64 `json:"value"`
}

// Surface is a recorded performance surface: a space and every
// measurement taken on it.
type Surface struct {
	Header
	space  *search.Space
	points []Point
	index  map[string]int
}

// NewSurface starts an empty surface with header h (for recorders: add
// measurements with Add, write with Encode). It checks the header.
func NewSurface(h Header) (*Surface, error) {
	var ps configs.Problems
	s := &Surface{Header: h, index: map[string]int{}}
	s.checkHeader(&ps)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Surface) checkHeader(ps *configs.Problems) {
	h := &s.Header
	switch {
	case h.Format != Format && h.Format != FormatV1:
		ps.Add("format", "must be %q (or the older %q), got %q", Format, FormatV1, h.Format)
	case h.Format == FormatV1 && h.Objective == objective.MaxCapacity:
		ps.Add("objective", "max_capacity surfaces need format %q, got %q", Format, h.Format)
	}
	if h.Name == "" {
		ps.Add("name", "must not be empty")
	}
	if h.Objective.Known() && !h.Objective.OpenLoop() && h.Concurrency < 1 {
		ps.Add("concurrency", "a %s surface needs the closed-loop concurrency it was measured at (max_capacity: its burst's), got %d", h.Objective, h.Concurrency)
	}
	if h.RateTolerance < 0 || h.RateTolerance >= 1 {
		ps.Add("rate_tolerance", "must be in [0, 1), got %v", h.RateTolerance)
	}
	if err := s.objective().Validate(); err != nil {
		for _, p := range err.(configs.Problems) {
			ps.Add(strings.TrimPrefix(p.Field, "objective."), "%s", p.Msg)
		}
	}
	sp, err := search.NewSpace(h.Space, s.rules())
	if err != nil {
		var sub configs.Problems
		if asProblems(err, &sub) {
			*ps = append(*ps, sub...)
		} else {
			ps.Add("space", "%v", err)
		}
		return
	}
	s.space = sp
}

func asProblems(err error, out *configs.Problems) bool {
	p, ok := err.(configs.Problems)
	if ok {
		*out = p
	}
	return ok
}

func (s *Surface) objective() objective.Objective {
	return objective.Objective{Kind: s.Header.Objective, ErrorBudget: s.ErrorBudget, Rate: s.Rate}
}

func (s *Surface) rules() search.Rules {
	r := search.Rules{SLO: time.Duration(s.SLO), Cores: s.Cores, GPUs: s.GPUs, Fixed: s.Fixed}
	r.SetClosedLoop(s.Header.Objective, s.Concurrency)
	return r
}

// Space is the surface's search space.
func (s *Surface) Space() *search.Space { return s.space }

// Objective is the study objective the surface was measured for.
func (s *Surface) Objective() objective.Objective { return s.objective() }

// Points returns every recorded configuration in first-recorded order. The
// slice is shared: do not modify it.
func (s *Surface) Points() []Point { return s.points }

// Add records one measurement. It rejects a config that is not a point of
// the space.
func (s *Surface) Add(m Measurement) error {
	c, err := s.config(m.Config)
	if err != nil {
		return err
	}
	for _, v := range []float64{m.QPS, m.P99Micros, m.ErrorRate} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("qps, p99_us and error_rate must be finite and non-negative, got %v, %v, %v", m.QPS, m.P99Micros, m.ErrorRate)
		}
	}
	if m.ErrorRate > 1 {
		return fmt.Errorf("error_rate is a fraction in [0, 1], got %v", m.ErrorRate)
	}
	if !m.failed() && m.P99Micros == 0 && m.QPS > 0 {
		return fmt.Errorf("a run that served requests needs p99_us > 0")
	}
	if err := s.checkCapacity(m); err != nil {
		return err
	}
	k := c.Key()
	i, ok := s.index[k]
	if !ok {
		i = len(s.points)
		s.index[k] = i
		s.points = append(s.points, Point{Config: c})
	}
	s.points[i].Runs = append(s.points[i].Runs, m)
	return nil
}

// checkCapacity checks a measurement's capacity fields against the
// surface's objective.
func (s *Surface) checkCapacity(m Measurement) error {
	if s.Header.Objective != objective.MaxCapacity {
		if m.Capacity != nil || m.Upper != 0 || len(m.Steps) > 0 {
			return fmt.Errorf("capacity, upper and steps belong to max_capacity surfaces, this one is %s", s.Header.Objective)
		}
		return nil
	}
	if m.Capacity == nil {
		if m.failed() {
			return nil
		}
		return fmt.Errorf("capacity is required on a max_capacity surface (0 when no rate met the SLO)")
	}
	c := *m.Capacity
	switch {
	case math.IsNaN(c) || math.IsInf(c, 0) || c < 0:
		return fmt.Errorf("capacity must be finite and non-negative, got %v", c)
	case math.IsNaN(m.Upper) || math.IsInf(m.Upper, 0) || m.Upper < 0:
		return fmt.Errorf("upper must be finite and non-negative, got %v", m.Upper)
	case m.Upper != 0 && m.Upper <= c:
		return fmt.Errorf("upper %v must be above the capacity %v (the lowest rate that broke the SLO)", m.Upper, c)
	}
	for i, st := range m.Steps {
		for _, v := range []float64{st.Rate, st.QPS, st.P99Micros, st.ErrorRate} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("steps[%d]: rate, qps, p99_us and error_rate must be finite and non-negative", i)
			}
		}
		if !(st.Rate > 0) || st.ErrorRate > 1 {
			return fmt.Errorf("steps[%d]: rate must be > 0 and error_rate in [0, 1], got %v and %v", i, st.Rate, st.ErrorRate)
		}
	}
	return nil
}

// config turns a measurement's value list into a configuration of the
// space.
func (s *Surface) config(vals []int64) (search.Config, error) {
	params := s.space.Params()
	if len(vals) != len(params) {
		return nil, fmt.Errorf("config has %d values, the space %d parameters", len(vals), len(params))
	}
	c := make(search.Config, len(vals))
	for i, v := range vals {
		c[i] = search.Assignment{Name: params[i].Name, Value: v}
	}
	if !s.space.Contains(c) {
		return nil, fmt.Errorf("config %s is not a point of the space", c)
	}
	return c, nil
}

// Decode reads a surface file (name is used in error messages) and checks
// it: the header, every measurement line, and that every runnable
// configuration of the space is recorded. Problems are reported together
// (up to 20), each as name:line: field: message, wrapping ErrFormat.
func Decode(r io.Reader, name string) (*Surface, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var problems []string
	report := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", name, line, fmt.Sprintf(format, args...)))
	}
	fail := func() error {
		return fmt.Errorf("%w:\n  %s", ErrFormat, strings.Join(problems, "\n  "))
	}

	var s *Surface
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if s == nil {
			var h Header
			if err := strictJSON(raw, &h); err != nil {
				report(line, "header: %v", err)
				return nil, fail()
			}
			s = &Surface{Header: h, index: map[string]int{}}
			var ps configs.Problems
			s.checkHeader(&ps)
			for _, p := range ps {
				report(line, "header: %s", p)
			}
			if len(ps) > 0 {
				return nil, fail()
			}
			continue
		}
		var m Measurement
		if err := strictJSON(raw, &m); err != nil {
			report(line, "%v", err)
		} else if err := s.Add(m); err != nil {
			report(line, "%v", err)
		}
		if len(problems) >= maxProblems {
			report(line, "too many problems; stopping")
			return nil, fail()
		}
	}
	if err := sc.Err(); err != nil {
		report(line+1, "%v", err)
		return nil, fail()
	}
	if s == nil {
		report(1, "empty file: want a header line")
		return nil, fail()
	}
	if len(problems) > 0 {
		return nil, fail()
	}
	if missing, total, example := s.missing(); missing > 0 {
		report(line, "%d of the %d runnable configurations of the space are not recorded (e.g. %s)", missing, total, example)
		return nil, fail()
	}
	return s, nil
}

func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value on the line")
	}
	return nil
}

// missing counts the runnable configurations of the space with no
// measurement.
func (s *Surface) missing() (missing, total int, example string) {
	runnable, _ := s.space.Runnable(context.Background())
	for _, c := range runnable {
		total++
		if _, ok := s.index[c.Key()]; !ok {
			missing++
			if example == "" {
				example = c.String()
			}
		}
	}
	return missing, total, example
}

// Load reads and checks the surface file at path.
func Load(path string) (*Surface, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	return Decode(f, path)
}

// Encode writes s in the file format: the header, then every measurement
// in the order recorded per configuration.
func (s *Surface) Encode(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(s.Header); err != nil {
		return err
	}
	for _, p := range s.points {
		for _, m := range p.Runs {
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// Truth returns the mean over c's recorded runs, or false when c is not
// recorded.
func (s *Surface) Truth(c search.Config) (Truth, bool) {
	i, ok := s.index[c.Key()]
	if !ok {
		return Truth{}, false
	}
	return s.truth(s.points[i]), true
}

func (s *Surface) truth(p Point) Truth {
	var t Truth
	n := 0
	var p99, capacity float64
	for _, m := range p.Runs {
		if m.failed() {
			t.Failed = true
			continue
		}
		n++
		t.QPS += m.QPS
		p99 += m.P99Micros
		t.ErrorRate += m.ErrorRate
		capacity += m.capacity()
	}
	if n == 0 {
		return t
	}
	t.QPS /= float64(n)
	t.ErrorRate /= float64(n)
	t.P99 = time.Duration(p99 / float64(n) * float64(time.Microsecond))
	if s.Header.Objective == objective.MaxCapacity {
		// The capacity already holds the SLO verdict of every step.
		t.Value = capacity / float64(n)
		t.Feasible = !t.Failed && t.Value > 0
		return t
	}
	t.Feasible = !t.Failed && s.feasible(t.QPS, t.P99, t.ErrorRate)
	t.Value = s.value(t.QPS, t.P99)
	return t
}

// feasible is the tuner's verdict on a measurement (objective.Constraints):
// P99 within the SLO and errors within the budget, whatever the objective,
// and for min_latency the surface's rate achieved as well.
func (s *Surface) feasible(qps float64, p99 time.Duration, errRate float64) bool {
	var rate *objective.Rate
	if s.Header.Objective.OpenLoop() {
		tol := s.RateTolerance
		if tol == 0 {
			tol = DefaultRateTolerance
		}
		rate = &objective.Rate{Sent: s.Rate, Achieved: qps, Shortfall: tol}
	}
	return s.constraints().Meets(p99, errRate, rate)
}

// constraints are the surface's SLO as the tuner's verdict takes it.
func (s *Surface) constraints() objective.Constraints {
	return objective.Constraints{SLO: time.Duration(s.SLO), ErrorBudget: s.ErrorBudget}
}

func (s *Surface) value(qps float64, p99 time.Duration) float64 {
	return s.Header.Objective.Value(qps, p99)
}

// Best returns the truly feasible configuration with the best mean
// objective, or false when none is feasible.
func (s *Surface) Best() (search.Config, Truth, bool) {
	var best search.Config
	var bt Truth
	o := s.objective()
	for _, p := range s.points {
		t := s.truth(p)
		if !t.Feasible {
			continue
		}
		if best == nil || o.Better(t.Value, bt.Value) {
			best, bt = p.Config, t
		}
	}
	return best, bt, best != nil
}

// ResolutionTop is how many of a surface's best configurations
// Resolution looks at.
const ResolutionTop = 20

// Resolution is how finely one measurement resolves s's objective: the
// median, over the ResolutionTop truly feasible configurations of best
// mean objective that have at least two successful runs, of one run's
// coefficient of variation (the sample standard deviation of its runs'
// objective over their mean). Two configurations closer than this cannot
// be told apart by one trial each. 0 when no configuration qualifies.
func (s *Surface) Resolution() float64 {
	type scored struct{ mean, cv float64 }
	var top []scored
	o := s.objective()
	for _, p := range s.points {
		t := s.truth(p)
		if !t.Feasible {
			continue
		}
		var vals []float64
		for _, m := range p.Runs {
			if m.failed() {
				continue
			}
			v := m.capacity()
			if s.Header.Objective != objective.MaxCapacity {
				v = s.value(m.QPS, m.P99())
			}
			vals = append(vals, v)
		}
		if len(vals) < 2 {
			continue
		}
		mean, sd := stat.MeanStdDev(vals, nil)
		if !(mean > 0) {
			continue
		}
		top = append(top, scored{mean, sd / mean})
	}
	slices.SortFunc(top, func(a, b scored) int {
		switch {
		case o.Better(a.mean, b.mean):
			return -1
		case o.Better(b.mean, a.mean):
			return 1
		}
		return 0
	})
	top = top[:min(len(top), ResolutionTop)]
	if len(top) == 0 {
		return 0
	}
	cvs := make([]float64, len(top))
	for i, t := range top {
		cvs[i] = t.cv
	}
	slices.Sort(cvs)
	n := len(cvs)
	return (cvs[(n-1)/2] + cvs[n/2]) / 2
}

// Ratio is how close objective value v comes to best, the measure of the
// benchmark's targets: v/best when maximising, best/v when minimising
// (P99), so that 1 is as good and 0.95 the 95% target either way.
func (s *Surface) Ratio(v, best float64) float64 {
	return share(s.objective().Direction(), v, best)
}

// share is Ratio for an objective that goes in direction d.
func share(d objective.Direction, v, best float64) float64 {
	if d == objective.Minimize {
		if v <= 0 {
			return 0
		}
		return best / v
	}
	if best <= 0 {
		return 0
	}
	return v / best
}

// PickShare is what a run's pick is worth: its truth's share of best, the
// surface's best truly feasible objective (Ratio), for an objective that
// goes in direction d; 0 when the run picked nothing or its pick is truly
// infeasible.
func PickShare(r Run, d objective.Direction, best float64) float64 {
	return worth(r.Pick, r.PickTruth, d, best)
}

// ConfirmedShare is PickShare for the run's confirmation winner: 0 when
// the stage recommended nothing (or was not run).
func ConfirmedShare(r Run, d objective.Direction, best float64) float64 {
	return worth(r.Confirmed, r.ConfirmedTruth, d, best)
}

// worth is a recommended configuration's truth's share of best; 0 for
// none, or a truly infeasible one.
func worth(c search.Config, t Truth, d objective.Direction, best float64) float64 {
	if c == nil || !t.Feasible {
		return 0
	}
	return share(d, t.Value, best)
}

// String names the surface for reports.
func (s *Surface) String() string {
	return s.Name + " (" + s.Header.Objective.String() + ", SLO " + time.Duration(s.SLO).String() + ", " + strconv.Itoa(len(s.points)) + " configurations)"
}

// ParseConfig reads a configuration of the surface's space written as
// name=value pairs separated by commas (as Config.String writes it, a
// derived choice by its name or code), in any order. Every parameter of
// the space must be given once, with a value the space holds.
func (s *Surface) ParseConfig(text string) (search.Config, error) {
	params := s.space.Params()
	given := map[string]string{}
	for _, kv := range strings.Split(text, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=value", kv)
		}
		if !slices.ContainsFunc(params, func(p search.Param) bool { return p.Name == name }) {
			return nil, fmt.Errorf("%s: not a parameter of surface %s", name, s.Name)
		}
		if _, dup := given[name]; dup {
			return nil, fmt.Errorf("%s: given twice", name)
		}
		given[name] = val
	}
	vals := make([]int64, 0, len(params))
	for _, p := range params {
		val, ok := given[p.Name]
		if !ok {
			return nil, fmt.Errorf("%s: missing (surface %s has %d parameters)", p.Name, s.Name, len(params))
		}
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			i := slices.Index(p.Choices, val)
			if i < 0 {
				return nil, fmt.Errorf("%s=%s: not a number or one of its choices", p.Name, val)
			}
			v = p.Values[i]
		}
		if !slices.Contains(p.Values, v) {
			return nil, fmt.Errorf("%s=%s: not one of the space's values %v", p.Name, val, p.Values)
		}
		vals = append(vals, v)
	}
	return s.config(vals)
}
