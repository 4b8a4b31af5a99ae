package search

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tfserving"
)

// maxValuesPerParam bounds how many values one range may expand to.
const maxValuesPerParam = 4096

// Param is one parameter of a space, with its values expanded.
type Param struct {
	// Name is the TF Serving name.
	Name string
	// Values are the values the parameter takes: ascending for numeric
	// parameters, the choice codes in declared order for derived choices.
	Values []int64
	// Choices names each value of a derived choice parameter (nil
	// otherwise).
	Choices []string
	// Log says the parameter is modelled on a log scale.
	Log bool

	info paramInfo
	// pos places each value in [0, 1] on the parameter's metric.
	pos []float64
	// ok marks the values that pass the rules on this parameter alone
	// (SLO/3, user bounds).
	ok []bool
	// index maps a value to its position in Values.
	index map[int64]int
}

// Space is a validated, finite search space: parameters in declared order,
// each with its values, and the rules configurations are checked against. A
// Space is immutable and safe for concurrent use.
type Space struct {
	params []Param
	rules  Rules
	byName map[string]int

	// runnableBits caches, for spaces of at most cacheLimit points, which
	// points pass the hard rules, indexed by code(idx); filled once on
	// first use (the rules are fixed, so the answer never changes).
	cacheOnce    sync.Once
	runnableBits []bool
}

// cacheLimit is the largest space whose runnable points are cached.
const cacheLimit = 1 << 16

// NewSpace builds a space from a study's space section and rules. Every
// problem in either is reported together, as configs.Problems, with its
// field path (space.max_batch_size.values[2], slo, bounds[0].max).
func NewSpace(spec configs.SpaceSpec, rules Rules) (*Space, error) {
	var ps configs.Problems
	rules.validate(&ps)
	if len(spec) == 0 {
		ps.Add("space", "must declare at least one parameter; known: %s", knownNames())
	}
	s := &Space{rules: rules, byName: map[string]int{}}
	for i, p := range spec {
		field := "space." + p.Name
		if p.Name == "" {
			field = "space[" + strconv.Itoa(i) + "]"
			ps.Add(field, "parameter has no name")
			continue
		}
		if _, dup := s.byName[p.Name]; dup {
			ps.Add(field, "declared more than once")
			continue
		}
		info, ok := lookupParam(p.Name)
		if !ok {
			ps.Add(field, "unknown parameter; known: %s", knownNames())
			continue
		}
		param, ok := expand(info, p, field, &ps)
		if !ok {
			continue
		}
		if p.UpToCores && !param.upToCores(rules.Cores, field, &ps) {
			continue
		}
		s.byName[p.Name] = len(s.params)
		s.params = append(s.params, param)
	}
	if len(ps) > 0 {
		return nil, ps.Err()
	}
	s.applySeparableRules(&ps)
	if len(ps) > 0 {
		return nil, ps.Err()
	}
	return s, nil
}

// expand turns one declaration into a Param, adding a problem for every
// invalid part of it.
func expand(info paramInfo, p configs.ParamSpec, field string, ps *configs.Problems) (Param, bool) {
	before := len(*ps)
	out := Param{Name: p.Name, info: info}
	if info.kind == derivedChoice {
		if len(p.Values) > 0 || p.Min != nil || p.Max != nil || p.Scale != "" || p.Step != 0 || p.Points != 0 {
			ps.Add(field, "is a derived choice: declare choices (%v), not values or a range", AllowedChoices)
		}
		if len(p.Choices) == 0 {
			ps.Add(field+".choices", "must list at least one of %v", AllowedChoices)
		}
		for i, c := range p.Choices {
			f := field + ".choices[" + strconv.Itoa(i) + "]"
			code := slices.Index(AllowedChoices, c)
			if code < 0 {
				ps.Add(f, "unknown choice %q; known: %v", c, AllowedChoices)
				continue
			}
			if j := slices.Index(p.Choices[:i], c); j >= 0 {
				ps.Add(f, "%q repeats choices[%d]", c, j)
				continue
			}
			out.Values = append(out.Values, int64(code))
			out.Choices = append(out.Choices, c)
		}
		if len(*ps) > before {
			return Param{}, false
		}
		out.pos = make([]float64, len(out.Values))
		for i := range out.pos {
			out.pos[i] = spread(i, len(out.Values))
		}
		out.finish()
		return out, true
	}

	if len(p.Choices) > 0 {
		ps.Add(field+".choices", "only derived parameters (%s) take choices", AllowedBatchSizes)
	}
	hasRange := p.Min != nil || p.Max != nil || p.Step != 0 || p.Points != 0
	switch {
	case len(p.Values) > 0 && hasRange:
		ps.Add(field, "give either values or min/max with a scale, not both")
	case len(p.Values) > 0:
		out.Values, out.Log = expandValues(info, p, field, ps)
	case hasRange:
		out.Values, out.Log = expandRange(info, p, field, ps)
	default:
		ps.Add(field, "needs values or min and max")
	}
	if len(*ps) > before {
		return Param{}, false
	}
	out.pos = positions(out.Values, out.Log)
	out.finish()
	return out, true
}

// upToCores keeps the values at most cores (and 0), for a declaration
// with up_to_cores; it reports a problem when none is left.
func (p *Param) upToCores(cores int, field string, ps *configs.Problems) bool {
	if cores < 1 {
		return true // unknown machine: keep them all
	}
	var vals []int64
	for _, v := range p.Values {
		if v <= int64(cores) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		ps.Add(field+".up_to_cores", "leaves no value on a %d-core machine", cores)
		return false
	}
	// Positions are recomputed over what is left, so the unit cube is
	// spanned as for a declaration of just these values.
	p.Values, p.pos = vals, positions(vals, p.Log)
	p.finish()
	return true
}

func (p *Param) finish() {
	p.index = make(map[int64]int, len(p.Values))
	for i, v := range p.Values {
		p.index[v] = i
	}
	p.ok = make([]bool, len(p.Values))
}

func expandValues(info paramInfo, p configs.ParamSpec, field string, ps *configs.Problems) ([]int64, bool) {
	for i, v := range p.Values {
		f := field + ".values[" + strconv.Itoa(i) + "]"
		if v < info.min {
			ps.Add(f, "must be >= %d, got %d", info.min, v)
		}
		if j := slices.Index(p.Values[:i], v); j >= 0 {
			ps.Add(f, "%d repeats values[%d]", v, j)
		}
	}
	vals := slices.Clone(p.Values)
	slices.Sort(vals)
	switch p.Scale {
	case configs.ScaleLinear:
		return vals, false
	case configs.ScaleLog:
		return vals, true
	case "":
		return vals, spansDecade(vals)
	case configs.ScalePow2:
		ps.Add(field+".scale", "pow2 generates a range from min and max; with values use linear or log")
	default:
		ps.Add(field+".scale", "unknown scale %q; use %s, %s or %s", p.Scale, configs.ScaleLinear, configs.ScaleLog, configs.ScalePow2)
	}
	return nil, false
}

// spansDecade reports whether sorted values span a factor of 8 or more
// (counting 0 as the smallest positive value's half).
func spansDecade(vals []int64) bool {
	lo, hi := logOffset(vals), float64(vals[len(vals)-1])
	return hi+lo >= 8*(float64(vals[0])+lo)
}

func expandRange(info paramInfo, p configs.ParamSpec, field string, ps *configs.Problems) ([]int64, bool) {
	if p.Min == nil {
		ps.Add(field+".min", "a range needs min")
	}
	if p.Max == nil {
		ps.Add(field+".max", "a range needs max")
	}
	if p.Min == nil || p.Max == nil {
		return nil, false
	}
	lo, hi := *p.Min, *p.Max
	if lo < info.min {
		ps.Add(field+".min", "must be >= %d, got %d", info.min, lo)
	}
	if hi < lo {
		ps.Add(field+".max", "must be >= min (%d), got %d", lo, hi)
	}
	scale := p.Scale
	if scale == "" {
		scale = configs.ScaleLinear
	}
	if p.Step != 0 && scale != configs.ScaleLinear {
		ps.Add(field+".step", "applies to the linear scale only")
	}
	if p.Points != 0 && scale != configs.ScaleLog {
		ps.Add(field+".points", "applies to the log scale only")
	}
	bad := len(*ps)
	switch scale {
	case configs.ScaleLinear, configs.ScaleLog, configs.ScalePow2:
	default:
		ps.Add(field+".scale", "unknown scale %q; use %s, %s or %s", p.Scale, configs.ScaleLinear, configs.ScaleLog, configs.ScalePow2)
	}
	if (scale == configs.ScaleLog || scale == configs.ScalePow2) && lo < 1 {
		ps.Add(field+".min", "a %s range must start at 1 or more, got %d", scale, lo)
	}
	if len(*ps) > bad || hi < lo || lo < info.min {
		return nil, false
	}

	switch scale {
	case configs.ScaleLinear:
		step := p.Step
		if step == 0 {
			step = 1
		}
		if step < 0 {
			ps.Add(field+".step", "must be positive, got %d", step)
			return nil, false
		}
		if (hi-lo)%step != 0 {
			ps.Add(field+".max", "%d is not reached from min %d in steps of %d", hi, lo, step)
			return nil, false
		}
		if n := (hi-lo)/step + 1; n > maxValuesPerParam {
			ps.Add(field, "expands to %d values, more than %d; use a larger step or a log scale", n, maxValuesPerParam)
			return nil, false
		}
		var out []int64
		for v := lo; v <= hi; v += step {
			out = append(out, v)
		}
		return out, false
	case configs.ScaleLog:
		if p.Points < 2 || p.Points > maxValuesPerParam {
			ps.Add(field+".points", "a log range needs between 2 and %d points, got %d", maxValuesPerParam, p.Points)
			return nil, false
		}
		out := []int64{lo}
		ratio := math.Log(float64(hi) / float64(lo))
		for i := 1; i < p.Points; i++ {
			v := int64(math.Round(float64(lo) * math.Exp(ratio*float64(i)/float64(p.Points-1))))
			if i == p.Points-1 {
				v = hi
			}
			if v > out[len(out)-1] {
				out = append(out, v)
			}
		}
		return out, true
	default: // pow2
		var out []int64
		for v := int64(1); v <= hi && v > 0; v *= 2 {
			if v >= lo {
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			ps.Add(field, "no power of two lies in [%d, %d]", lo, hi)
			return nil, false
		}
		return out, true
	}
}

// logOffset is the constant added before taking logs so that a 0 value
// (timeout 0, parallelism "auto") gets a finite place below the others.
func logOffset(vals []int64) float64 {
	if vals[0] > 0 {
		return 0
	}
	for _, v := range vals {
		if v > 0 {
			return float64(v) / 2
		}
	}
	return 1
}

// positions places sorted values in [0, 1] on a linear or log metric.
func positions(vals []int64, log bool) []float64 {
	t := make([]float64, len(vals))
	off := logOffset(vals)
	for i, v := range vals {
		t[i] = float64(v)
		if log {
			t[i] = math.Log(float64(v) + off)
		}
	}
	out := make([]float64, len(vals))
	span := t[len(t)-1] - t[0]
	for i := range t {
		if span == 0 {
			out[i] = 0.5
			continue
		}
		out[i] = (t[i] - t[0]) / span
	}
	return out
}

func spread(i, n int) float64 {
	if n == 1 {
		return 0.5
	}
	return float64(i) / float64(n-1)
}

// applySeparableRules marks, per parameter, the values that pass the rules on
// that parameter alone, and reports a parameter none of whose values can
// ever run. A parameter the space does not declare is checked at its fixed
// value.
func (s *Space) applySeparableRules(ps *configs.Problems) {
	for i := range s.params {
		p := &s.params[i]
		anyOK := false
		var reason string
		for j, v := range p.Values {
			ok, why := s.valueOK(p.Name, v)
			p.ok[j] = ok
			anyOK = anyOK || ok
			if !ok && reason == "" {
				reason = why
			}
		}
		if !anyOK {
			ps.Add("space."+p.Name, "no value can run: every one breaks a hard rule (e.g. %s)", reason)
		}
	}
	for _, info := range known {
		if _, declared := s.byName[info.name]; declared {
			continue
		}
		v := s.fixedValue(info)
		if ok, why := s.valueOK(info.name, v); !ok {
			ps.Add("space."+info.name, "not declared, and its fixed value breaks a hard rule: %s", why)
		}
	}
}

// valueOK checks the single-parameter rules.
func (s *Space) valueOK(name string, v int64) (bool, string) {
	if name == BatchTimeoutMicros && !s.rules.sloTimeoutOK(v) {
		return false, RuleSLOTimeout + ": " + s.rules.sloTimeoutReason(v)
	}
	if ok, why := s.rules.boundOK(name, v); !ok {
		return false, RuleUserBound + ": " + why
	}
	return true, ""
}

// fixedValue is the value a parameter the space does not declare runs with:
// the base batching.config's when set, else TF Serving's default.
func (s *Space) fixedValue(info paramInfo) int64 {
	b := s.rules.Base
	get := func(w *wrapperspb.Int64Value) int64 {
		if w != nil {
			return w.GetValue()
		}
		return info.tfDefault(s.rules)
	}
	switch info.name {
	case MaxBatchSize:
		return get(b.GetMaxBatchSize())
	case BatchTimeoutMicros:
		return get(b.GetBatchTimeoutMicros())
	case NumBatchThreads:
		return get(b.GetNumBatchThreads())
	case MaxEnqueuedBatches:
		return get(b.GetMaxEnqueuedBatches())
	}
	return info.tfDefault(s.rules)
}

// Params returns the space's parameters in declared order. The slices are
// shared: do not modify them.
func (s *Space) Params() []Param { return slices.Clone(s.params) }

// Rules returns the rules the space was built with.
func (s *Space) Rules() Rules { return s.rules }

// Dims is the number of parameters.
func (s *Space) Dims() int { return len(s.params) }

// Size is the number of configurations in the space (before the hard
// rules), saturating at math.MaxInt64.
func (s *Space) Size() int64 {
	n := int64(1)
	for _, p := range s.params {
		k := int64(len(p.Values))
		if n > math.MaxInt64/k {
			return math.MaxInt64
		}
		n *= k
	}
	return n
}

// Contains reports whether c assigns every parameter of the space, in
// declared order, one of its values, and nothing else.
func (s *Space) Contains(c Config) bool {
	_, ok := s.indexOf(c)
	return ok
}

// indexOf returns the value index of each parameter, or false when c is not
// a point of the space.
func (s *Space) indexOf(c Config) ([]int, bool) {
	if len(c) != len(s.params) {
		return nil, false
	}
	idx := make([]int, len(c))
	for i, a := range c {
		p := &s.params[i]
		if a.Name != p.Name {
			return nil, false
		}
		j, ok := p.index[a.Value]
		if !ok {
			return nil, false
		}
		idx[i] = j
	}
	return idx, true
}

// configAt builds the configuration at value indexes idx.
func (s *Space) configAt(idx []int) Config {
	c := make(Config, len(idx))
	for i, j := range idx {
		c[i] = Assignment{Name: s.params[i].Name, Value: s.params[i].Values[j]}
	}
	return c
}

// Check applies every hard rule to c and returns what it breaks (nil when c
// may run). c need not be in the space (a production baseline, a trial of an
// earlier study), but it must assign exactly the space's parameters; values
// it leaves to the base take their fixed value.
func (s *Space) Check(c Config) Violations {
	var vs Violations
	seen := map[string]bool{}
	for _, a := range c {
		if _, ok := s.byName[a.Name]; !ok {
			vs = append(vs, Violation{RuleMalformed, a.Name, "not a parameter of this space"})
			continue
		}
		if seen[a.Name] {
			vs = append(vs, Violation{RuleMalformed, a.Name, "assigned more than once"})
		}
		seen[a.Name] = true
	}
	for _, p := range s.params {
		if !seen[p.Name] {
			vs = append(vs, Violation{RuleMalformed, p.Name, "missing"})
		}
	}
	if len(vs) > 0 {
		return vs
	}
	for _, a := range c {
		info, _ := lookupParam(a.Name)
		if a.Value < info.min {
			vs = append(vs, Violation{RuleTFValidity, a.Name, fmt.Sprintf("must be >= %d, got %d", info.min, a.Value)})
		}
		if info.kind == derivedChoice && (a.Value < 0 || a.Value >= int64(len(AllowedChoices))) {
			vs = append(vs, Violation{RuleMalformed, a.Name, fmt.Sprintf("unknown choice code %d", a.Value)})
		}
	}
	timeout := s.value(c, BatchTimeoutMicros)
	if !s.rules.sloTimeoutOK(timeout) {
		vs = append(vs, Violation{RuleSLOTimeout, BatchTimeoutMicros, s.rules.sloTimeoutReason(timeout)})
	}
	for _, info := range known {
		if ok, why := s.rules.boundOK(info.name, s.value(c, info.name)); !ok {
			vs = append(vs, Violation{RuleUserBound, info.name, why})
		}
	}
	if err := configs.ValidateBatching(s.Batching(c)); err != nil {
		for _, p := range err.(configs.Problems) {
			vs = append(vs, Violation{RuleTFValidity, p.Field, p.Msg})
		}
	}
	return vs
}

// value is c's value for name, or the fixed value when c does not assign it.
func (s *Space) value(c Config, name string) int64 {
	if v, ok := c.Get(name); ok {
		return v
	}
	info, _ := lookupParam(name)
	return s.fixedValue(info)
}

// isRunnable is the strategies' check for a point of the space: the
// separable rules from the precomputed marks, then the whole-config rules
// (from the cache when the space is small enough to have one).
func (s *Space) isRunnable(idx []int) bool {
	if !s.separableOK(idx) {
		return false
	}
	if bits := s.cache(); bits != nil {
		return bits[s.code(idx)]
	}
	return len(s.Check(s.configAt(idx))) == 0
}

// cache returns the runnable marks, computing them on first use, or nil
// for a space larger than cacheLimit.
func (s *Space) cache() []bool {
	if s.Size() > cacheLimit {
		return nil
	}
	s.cacheOnce.Do(func() {
		bits := make([]bool, s.Size())
		idx := make([]int, len(s.params))
		for code := range bits {
			rem := code
			for i := len(idx) - 1; i >= 0; i-- {
				k := len(s.params[i].Values)
				idx[i] = rem % k
				rem /= k
			}
			bits[code] = s.separableOK(idx) && len(s.Check(s.configAt(idx))) == 0
		}
		s.runnableBits = bits
	})
	return s.runnableBits
}

// code numbers a point in grid order (mixed radix, last parameter
// fastest). Only meaningful when Size() fits an int.
func (s *Space) code(idx []int) int {
	c := 0
	for i, j := range idx {
		c = c*len(s.params[i].Values) + j
	}
	return c
}

// Batching returns the batching.config message c runs with: the base with
// c's batching fields set, and allowed_batch_sizes derived from the final
// max_batch_size when the space declares it.
func (s *Space) Batching(c Config) *tfserving.BatchingParameters {
	var p *tfserving.BatchingParameters
	if s.rules.Base != nil {
		p = proto.Clone(s.rules.Base).(*tfserving.BatchingParameters)
	} else {
		p = &tfserving.BatchingParameters{}
	}
	allowed, derive := int64(0), false
	for _, a := range c {
		switch a.Name {
		case MaxBatchSize:
			p.MaxBatchSize = wrapperspb.Int64(a.Value)
		case BatchTimeoutMicros:
			p.BatchTimeoutMicros = wrapperspb.Int64(a.Value)
		case NumBatchThreads:
			p.NumBatchThreads = wrapperspb.Int64(a.Value)
		case MaxEnqueuedBatches:
			p.MaxEnqueuedBatches = wrapperspb.Int64(a.Value)
		case AllowedBatchSizes:
			allowed, derive = a.Value, true
		}
	}
	if derive {
		maxBatch := int64(configs.DefaultMaxBatchSize)
		if w := p.GetMaxBatchSize(); w != nil {
			maxBatch = w.GetValue()
		}
		if p.GetEnableLargeBatchSplitting().GetValue() {
			// TF then pads to max_execution_batch_size, not max_batch_size.
			maxBatch = configs.DefaultMaxExecutionBatchSize
			if w := p.GetMaxExecutionBatchSize(); w != nil {
				maxBatch = w.GetValue()
			}
		}
		p.AllowedBatchSizes = AllowedSizes(allowed, maxBatch)
	}
	return p
}

// Flags returns the tensorflow_model_server flags c sets, in declared order
// (--tensorflow_intra_op_parallelism=4).
func (s *Space) Flags(c Config) []string {
	var out []string
	for _, a := range c {
		if info, ok := lookupParam(a.Name); ok && info.kind == serverFlag {
			out = append(out, "--"+a.Name+"="+strconv.FormatInt(a.Value, 10))
		}
	}
	return out
}

// Defaults is TF Serving's out-of-the-box configuration (max_batch_size
// 1000, timeout 0, 10 queued batches, a thread per core, auto parallelism)
// snapped to the nearest runnable values of the space. Where the space
// does not hold 0 ("auto") for a parallelism flag, 0 snaps to the space's
// smallest value; defaults(true) snaps it as the core count it stands for.
func (s *Space) Defaults() Config { return s.defaults(false) }

// defaults is Defaults, with "auto" (0) for the parallelism flags snapped
// as one thread per schedulable core when autoCores is set and the space
// does not hold 0: what TF Serving (process_util.cc) and the stand-in run
// when the flag is left at 0.
func (s *Space) defaults(autoCores bool) Config {
	return s.snapRaw(func(info paramInfo) int64 {
		v := info.tfDefault(s.rules)
		if autoCores && v == 0 && info.autoIsCores() && !s.holds(info.name, 0) {
			return int64(max(s.rules.Cores, 1))
		}
		return v
	})
}

// holds reports whether the space declares parameter name with value v.
func (s *Space) holds(name string, v int64) bool {
	i, ok := s.byName[name]
	if !ok {
		return false
	}
	_, ok = s.params[i].index[v]
	return ok
}

// Recipe is the seeds' starting recipe (max_batch_size 8, timeout 20000 µs,
// 32 queued batches, a batch thread per accelerator, intra-op half the
// cores, inter-op 2) snapped to the nearest runnable values of the space.
func (s *Space) Recipe() Config {
	return s.snapRaw(func(info paramInfo) int64 { return info.recipe(s.rules) })
}

func (s *Space) snapRaw(raw func(paramInfo) int64) Config {
	idx := make([]int, len(s.params))
	for i := range s.params {
		idx[i] = s.snapIndex(i, raw(s.params[i].info))
	}
	return s.configAt(idx)
}

// Snap returns the configuration of the space nearest to c, parameter by
// parameter on each parameter's metric, preferring values that pass the
// single-parameter rules. Parameters c does not assign take their fixed
// value before snapping.
func (s *Space) Snap(c Config) Config {
	return s.snapRaw(func(info paramInfo) int64 { return s.value(c, info.name) })
}

// snapIndex returns the index of parameter i's value nearest to v among the
// values passing the separable rules.
func (s *Space) snapIndex(i int, v int64) int {
	p := &s.params[i]
	if j, ok := p.index[v]; ok && p.ok[j] {
		return j
	}
	var target float64
	if p.info.kind == derivedChoice {
		target = -1 // unknown choice: first runnable one
	} else {
		target = s.position(i, v)
	}
	best, bestD := -1, math.Inf(1)
	for j := range p.Values {
		if !p.ok[j] {
			continue
		}
		if d := math.Abs(p.pos[j] - target); d < bestD {
			best, bestD = j, d
		}
	}
	if best < 0 {
		return 0
	}
	return best
}

// position places an arbitrary value on parameter i's [0, 1] metric
// (outside [0, 1] when v lies outside the values).
func (s *Space) position(i int, v int64) float64 {
	p := &s.params[i]
	vals := p.Values
	if !p.Log {
		span := float64(vals[len(vals)-1] - vals[0])
		if span == 0 {
			return 0.5
		}
		return float64(v-vals[0]) / span
	}
	off := logOffset(vals)
	lo, hi := math.Log(float64(vals[0])+off), math.Log(float64(vals[len(vals)-1])+off)
	if hi == lo {
		return 0.5
	}
	x := float64(v) + off
	if x <= 0 {
		return math.Inf(-1)
	}
	return (math.Log(x) - lo) / (hi - lo)
}

// Runnable lists every configuration of the space that passes the hard
// rules, in grid order. It walks all Size() points: meant for spaces small
// enough to sweep.
func (s *Space) Runnable(ctx context.Context) ([]Config, error) {
	pts, err := s.unseenRunnable(ctx, taken{}, -1)
	if err != nil {
		return nil, err
	}
	out := make([]Config, len(pts))
	for i, idx := range pts {
		out[i] = s.configAt(idx)
	}
	return out, nil
}
