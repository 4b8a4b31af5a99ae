package search

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tfserving"
)

func i64(v int64) *int64 { return &v }

// rules60 is a study with a 60 ms SLO (timeouts must stay below 20000 µs)
// on 4 cores and one accelerator.
var rules60 = Rules{SLO: 60 * time.Millisecond, Cores: 4, GPUs: 1}

func mustSpace(t testing.TB, spec configs.SpaceSpec, r Rules) *Space {
	t.Helper()
	s, err := NewSpace(spec, r)
	if err != nil {
		t.Fatalf("NewSpace: %v", err)
	}
	return s
}

func problemFields(err error) []string {
	var ps configs.Problems
	if !errors.As(err, &ps) {
		return []string{"not Problems: " + err.Error()}
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Field
	}
	return out
}

func TestNewSpaceReportsEveryProblemWithItsPath(t *testing.T) {
	tests := []struct {
		name  string
		spec  configs.SpaceSpec
		rules Rules
		want  []string // field paths, in report order
	}{
		// Nothing declared.
		{"empty", nil, rules60, []string{"space"}},
		// Values below TF's minimum and a repeat, all in one parameter.
		{"bad values", configs.SpaceSpec{{Name: MaxBatchSize, Values: []int64{8, 0, -1, 8}}}, rules60,
			[]string{"space.max_batch_size.values[1]", "space.max_batch_size.values[2]", "space.max_batch_size.values[3]"}},
		// Unknown parameter and a duplicate, reported together.
		{"unknown and duplicate", configs.SpaceSpec{
			{Name: "max_batch_sise", Values: []int64{1}},
			{Name: MaxBatchSize, Values: []int64{1}},
			{Name: MaxBatchSize, Values: []int64{2}},
		}, rules60, []string{"space.max_batch_sise", "space.max_batch_size"}},
		// Values and a range at once.
		{"values and range", configs.SpaceSpec{{Name: NumBatchThreads, Values: []int64{1}, Min: i64(1), Max: i64(4)}}, rules60,
			[]string{"space.num_batch_threads"}},
		// A range with max below min, a step on a log scale and no points.
		{"bad range", configs.SpaceSpec{
			{Name: MaxBatchSize, Min: i64(64), Max: i64(8)},
			{Name: MaxEnqueuedBatches, Min: i64(1), Max: i64(100), Scale: configs.ScaleLog, Step: 2},
		}, rules60, []string{"space.max_batch_size.max", "space.max_enqueued_batches.step", "space.max_enqueued_batches.points"}},
		// A linear range whose max is not reached in whole steps.
		{"unreached max", configs.SpaceSpec{{Name: BatchTimeoutMicros, Min: i64(0), Max: i64(1000), Step: 300}}, rules60,
			[]string{"space.batch_timeout_micros.max"}},
		// A log range cannot start at 0; an unknown scale is named.
		{"log from zero and unknown scale", configs.SpaceSpec{
			{Name: BatchTimeoutMicros, Min: i64(0), Max: i64(1000), Scale: configs.ScaleLog, Points: 4},
			{Name: MaxBatchSize, Min: i64(1), Max: i64(8), Scale: "cubic"},
		}, rules60, []string{"space.batch_timeout_micros.min", "space.max_batch_size.scale"}},
		// No power of two in the range.
		{"no power of two", configs.SpaceSpec{{Name: MaxBatchSize, Min: i64(5), Max: i64(7), Scale: configs.ScalePow2}}, rules60,
			[]string{"space.max_batch_size"}},
		// Choices only on the derived parameter, and only known ones.
		{"choices", configs.SpaceSpec{
			{Name: MaxBatchSize, Choices: []string{"pow2"}, Values: []int64{8}},
			{Name: AllowedBatchSizes, Choices: []string{"pow2", "fibonacci", "pow2"}},
		}, rules60, []string{"space.max_batch_size.choices", "space.allowed_batch_sizes.choices[1]", "space.allowed_batch_sizes.choices[2]"}},
		// Every timeout breaks SLO/3 (60ms/3 = 20000 µs, strictly below).
		{"every timeout too long", configs.SpaceSpec{{Name: BatchTimeoutMicros, Values: []int64{20000, 50000}}}, rules60,
			[]string{"space.batch_timeout_micros"}},
		// The rules themselves, and a bound that excludes every value.
		{"bad rules", configs.SpaceSpec{{Name: MaxBatchSize, Values: []int64{64, 128}}},
			Rules{SLO: 0, Cores: 0, GPUs: -1, Bounds: []Bound{{Name: "nope", Max: i64(3)}, {Name: MaxBatchSize}}},
			[]string{"slo", "cores", "gpus", "bounds[0].name", "bounds[1]"}},
		// A bound that excludes every declared value.
		{"bound excludes all", configs.SpaceSpec{{Name: MaxBatchSize, Values: []int64{64, 128}}},
			Rules{SLO: time.Second, Cores: 1, Bounds: []Bound{{Name: MaxBatchSize, Max: i64(32)}}},
			[]string{"space.max_batch_size"}},
		// An undeclared parameter's fixed value (from the base) breaks SLO/3.
		{"base timeout too long", configs.SpaceSpec{{Name: MaxBatchSize, Values: []int64{8}}},
			Rules{SLO: 30 * time.Millisecond, Cores: 1, Base: &tfserving.BatchingParameters{BatchTimeoutMicros: wrapperspb.Int64(10000)}},
			[]string{"space.batch_timeout_micros"}},
		// A base batching.config TF would refuse.
		{"bad base", configs.SpaceSpec{{Name: MaxBatchSize, Values: []int64{8}}},
			Rules{SLO: time.Second, Cores: 1, Base: &tfserving.BatchingParameters{MaxEnqueuedBatches: wrapperspb.Int64(0)}},
			[]string{"base.max_enqueued_batches"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSpace(tc.spec, tc.rules)
			if err == nil {
				t.Fatal("NewSpace accepted an invalid space")
			}
			if diff := cmp.Diff(tc.want, problemFields(err)); diff != "" {
				t.Errorf("problem fields (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestNewSpaceExpandsValues(t *testing.T) {
	tests := []struct {
		name string
		spec configs.ParamSpec
		want []int64
		log  bool
	}{
		// A list is sorted; spanning 8× or more it is modelled on a log scale.
		{"values sorted, log inferred", configs.ParamSpec{Name: MaxBatchSize, Values: []int64{32, 1, 8}}, []int64{1, 8, 32}, true},
		// A narrow list stays linear.
		{"values linear", configs.ParamSpec{Name: NumBatchThreads, Values: []int64{2, 3, 4}}, []int64{2, 3, 4}, false},
		// A list may name its metric.
		{"values with scale", configs.ParamSpec{Name: NumBatchThreads, Values: []int64{1, 16}, Scale: configs.ScaleLinear}, []int64{1, 16}, false},
		// Linear range with a step (the default scale).
		{"linear", configs.ParamSpec{Name: BatchTimeoutMicros, Min: i64(0), Max: i64(6000), Step: 2000}, []int64{0, 2000, 4000, 6000}, false},
		// Linear range, step 1 by default.
		{"linear step 1", configs.ParamSpec{Name: NumBatchThreads, Min: i64(1), Max: i64(4)}, []int64{1, 2, 3, 4}, false},
		// Powers of two inside [min, max].
		{"pow2", configs.ParamSpec{Name: MaxBatchSize, Min: i64(3), Max: i64(100), Scale: configs.ScalePow2}, []int64{4, 8, 16, 32, 64}, true},
		// Log range: points evenly spaced in log, ends exact, rounding repeats dropped.
		{"log", configs.ParamSpec{Name: MaxEnqueuedBatches, Min: i64(1), Max: i64(1000), Scale: configs.ScaleLog, Points: 4}, []int64{1, 10, 100, 1000}, true},
		{"log rounding", configs.ParamSpec{Name: MaxEnqueuedBatches, Min: i64(1), Max: i64(3), Scale: configs.ScaleLog, Points: 5}, []int64{1, 2, 3}, true},
		// Choices keep their declared order and become codes.
		{"choices", configs.ParamSpec{Name: AllowedBatchSizes, Choices: []string{"max", "none"}}, []int64{AllowedMax, AllowedNone}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpace(t, configs.SpaceSpec{tc.spec}, Rules{SLO: time.Second, Cores: 2})
			p := s.Params()[0]
			if diff := cmp.Diff(tc.want, p.Values); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if p.Log != tc.log {
				t.Errorf("Log = %v, want %v", p.Log, tc.log)
			}
		})
	}
}

func TestSpaceKeepsDeclaredOrderFromYAML(t *testing.T) {
	doc := `
tensorflow_inter_op_parallelism: {values: [1, 2]}
max_batch_size: {min: 1, max: 64, scale: pow2}
batch_timeout_micros: {values: [0, 1000, 5000]}
allowed_batch_sizes: {choices: [none, pow2]}
`
	var spec configs.SpaceSpec
	if err := yaml.Unmarshal([]byte(doc), &spec); err != nil {
		t.Fatal(err)
	}
	s := mustSpace(t, spec, rules60)
	var names []string
	for _, p := range s.Params() {
		names = append(names, p.Name)
	}
	want := []string{InterOpParallelism, MaxBatchSize, BatchTimeoutMicros, AllowedBatchSizes}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("parameter order (-want +got):\n%s", diff)
	}
	if got := s.Size(); got != 2*7*3*2 {
		t.Errorf("Size = %d, want %d", got, 2*7*3*2)
	}
}

func cfg(kv ...any) Config {
	var c Config
	for i := 0; i < len(kv); i += 2 {
		c = append(c, Assignment{Name: kv[i].(string), Value: int64(kv[i+1].(int))})
	}
	return c
}

func TestCheckNamesTheRuleAndReason(t *testing.T) {
	spec := configs.SpaceSpec{
		{Name: MaxBatchSize, Values: []int64{8, 64, 256}},
		{Name: BatchTimeoutMicros, Values: []int64{0, 19999, 20000}},
	}
	split := &tfserving.BatchingParameters{
		EnableLargeBatchSplitting: wrapperspb.Bool(true),
		MaxExecutionBatchSize:     wrapperspb.Int64(128),
	}
	tests := []struct {
		name  string
		rules Rules
		c     Config
		want  []string // rule:field
	}{
		// Just below SLO/3: allowed.
		{"below SLO/3", rules60, cfg(MaxBatchSize, 8, BatchTimeoutMicros, 19999), nil},
		// Exactly SLO/3 is not strictly below it.
		{"at SLO/3", rules60, cfg(MaxBatchSize, 8, BatchTimeoutMicros, 20000), []string{"slo_timeout:batch_timeout_micros"}},
		// A configuration from elsewhere (outside the space) is still checked.
		{"far above SLO/3", rules60, cfg(MaxBatchSize, 8, BatchTimeoutMicros, 90000), []string{"slo_timeout:batch_timeout_micros"}},
		// The user's bound.
		{"user bound", Rules{SLO: 60 * time.Millisecond, Cores: 1, Bounds: []Bound{{Name: MaxBatchSize, Max: i64(64)}}},
			cfg(MaxBatchSize, 256, BatchTimeoutMicros, 0), []string{"user_bound:max_batch_size"}},
		// TF's own rule: with splitting, max_execution_batch_size must not
		// exceed max_batch_size (the base sets 128).
		{"tf validity", Rules{SLO: 60 * time.Millisecond, Cores: 1, Base: split},
			cfg(MaxBatchSize, 64, BatchTimeoutMicros, 0), []string{"tf_validity:max_execution_batch_size"}},
		// Several rules at once are all reported.
		{"two rules", Rules{SLO: 60 * time.Millisecond, Cores: 1, Bounds: []Bound{{Name: MaxBatchSize, Min: i64(16)}}},
			cfg(MaxBatchSize, 8, BatchTimeoutMicros, 30000), []string{"slo_timeout:batch_timeout_micros", "user_bound:max_batch_size"}},
		// Values TF refuses outright.
		{"non-positive batch", rules60, cfg(MaxBatchSize, 0, BatchTimeoutMicros, 0),
			[]string{"tf_validity:max_batch_size", "tf_validity:max_batch_size"}},
		// A configuration that does not name the space's parameters.
		{"malformed", rules60, cfg(MaxBatchSize, 8, "grpc_max_threads", 4, MaxBatchSize, 16),
			[]string{"malformed:grpc_max_threads", "malformed:max_batch_size", "malformed:batch_timeout_micros"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpace(t, spec, tc.rules)
			var got []string
			for _, v := range s.Check(tc.c) {
				got = append(got, v.Rule+":"+v.Field)
				if v.Reason == "" {
					t.Errorf("violation %s has no reason", v.Rule)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			err := s.Check(tc.c).Err()
			if (err != nil) != (len(tc.want) > 0) || (err != nil && !errors.Is(err, ErrRejected)) {
				t.Errorf("Err() = %v, want an ErrRejected iff violations", err)
			}
		})
	}
}

func TestCheckReasonSaysWhy(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{{Name: BatchTimeoutMicros, Values: []int64{0, 25000}}}, rules60)
	vs := s.Check(cfg(BatchTimeoutMicros, 25000))
	if len(vs) != 1 {
		t.Fatalf("violations = %v, want one", vs)
	}
	for _, want := range []string{"25000 µs", "SLO/3 = 20ms", "SLO 60ms"} {
		if !strings.Contains(vs[0].Reason, want) {
			t.Errorf("reason %q lacks %q", vs[0].Reason, want)
		}
	}
}

func TestAllowedSizes(t *testing.T) {
	tests := []struct {
		name     string
		code     int64
		maxBatch int64
		want     []int64
	}{
		// Unset: nil.
		{"none", AllowedNone, 64, nil},
		// Powers of two below the max, then the max itself.
		{"pow2 exact", AllowedPow2, 64, []int64{1, 2, 4, 8, 16, 32, 64}},
		{"pow2 uneven", AllowedPow2, 12, []int64{1, 2, 4, 8, 12}},
		{"pow2 of one", AllowedPow2, 1, []int64{1}},
		// Quarters, rounded up, deduplicated.
		{"quarters", AllowedQuarters, 100, []int64{25, 50, 75, 100}},
		{"quarters small", AllowedQuarters, 2, []int64{1, 2}},
		// Only the max.
		{"max", AllowedMax, 48, []int64{48}},
		// Unknown code or a nonsense max: nil.
		{"unknown", 9, 64, nil},
		{"zero max", AllowedPow2, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AllowedSizes(tc.code, tc.maxBatch)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("AllowedSizes(%d, %d) (-want +got):\n%s", tc.code, tc.maxBatch, diff)
			}
			if len(got) > 0 && got[len(got)-1] != tc.maxBatch {
				t.Errorf("last entry %d, TF requires max_batch_size %d", got[len(got)-1], tc.maxBatch)
			}
		})
	}
}

func TestBatchingAndFlags(t *testing.T) {
	spec := configs.SpaceSpec{
		{Name: MaxBatchSize, Values: []int64{8, 12}},
		{Name: AllowedBatchSizes, Choices: []string{"none", "pow2"}},
		{Name: IntraOpParallelism, Values: []int64{0, 2}},
		{Name: NumBatchThreads, Values: []int64{1, 2}},
	}
	base := &tfserving.BatchingParameters{ThreadPoolName: wrapperspb.String("pool"), MaxEnqueuedBatches: wrapperspb.Int64(7)}
	s := mustSpace(t, spec, Rules{SLO: time.Second, Cores: 2, Base: base})
	c := cfg(MaxBatchSize, 12, AllowedBatchSizes, int(AllowedPow2), IntraOpParallelism, 2, NumBatchThreads, 2)

	got := s.Batching(c)
	want := &tfserving.BatchingParameters{
		MaxBatchSize:       wrapperspb.Int64(12),
		NumBatchThreads:    wrapperspb.Int64(2),
		MaxEnqueuedBatches: wrapperspb.Int64(7),
		ThreadPoolName:     wrapperspb.String("pool"),
		AllowedBatchSizes:  []int64{1, 2, 4, 8, 12},
	}
	if !proto.Equal(got, want) {
		t.Errorf("Batching = %v, want %v", got, want)
	}
	if err := configs.ValidateBatching(got); err != nil {
		t.Errorf("rendered config is invalid for TF: %v", err)
	}
	if base.MaxBatchSize != nil {
		t.Error("Batching modified the base")
	}
	if diff := cmp.Diff([]string{"--tensorflow_intra_op_parallelism=2"}, s.Flags(c)); diff != "" {
		t.Errorf("Flags (-want +got):\n%s", diff)
	}
	if got := c.String(); got != "max_batch_size=12 allowed_batch_sizes=pow2 tensorflow_intra_op_parallelism=2 num_batch_threads=2" {
		t.Errorf("String = %q", got)
	}
}

func TestDefaultsAndRecipeSnapIntoTheSpace(t *testing.T) {
	spec := configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(1), Max: i64(512), Scale: configs.ScalePow2},
		{Name: BatchTimeoutMicros, Values: []int64{0, 1000, 5000, 15000, 30000}},
		{Name: NumBatchThreads, Values: []int64{1, 2, 4, 8}},
		{Name: MaxEnqueuedBatches, Values: []int64{4, 16, 128}},
		{Name: IntraOpParallelism, Values: []int64{0, 1, 2, 4}},
		{Name: InterOpParallelism, Values: []int64{0, 2, 8}},
	}
	// SLO 45 ms: timeouts must stay below 15000 µs.
	s := mustSpace(t, spec, Rules{SLO: 45 * time.Millisecond, Cores: 4, GPUs: 1})
	tests := []struct {
		name string
		got  Config
		want Config
	}{
		// TF's defaults: 1000 → 512 (largest), timeout 0, threads = cores
		// (4), 10 queued → 16 (nearest in log), auto parallelism.
		{"defaults", s.Defaults(), cfg(MaxBatchSize, 512, BatchTimeoutMicros, 0, NumBatchThreads, 4, MaxEnqueuedBatches, 16, IntraOpParallelism, 0, InterOpParallelism, 0)},
		// The seeds' recipe: 8, 20000 µs → 5000 (15000 and 30000 break
		// SLO/3), a thread per GPU, 32 → 16 (nearer than 128 in log),
		// intra = cores/2, inter 2.
		{"recipe", s.Recipe(), cfg(MaxBatchSize, 8, BatchTimeoutMicros, 5000, NumBatchThreads, 1, MaxEnqueuedBatches, 16, IntraOpParallelism, 2, InterOpParallelism, 2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if vs := s.Check(tc.got); len(vs) > 0 {
				t.Errorf("snapped configuration breaks a rule: %v", vs)
			}
		})
	}
}

func TestRunnableExcludesRuleBreakers(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Values: []int64{8, 64}},
		{Name: BatchTimeoutMicros, Values: []int64{0, 10000, 30000}},
	}, Rules{SLO: 60 * time.Millisecond, Cores: 1, Bounds: []Bound{{Name: MaxBatchSize, Max: i64(32)}}})
	got, err := s.Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []Config{cfg(MaxBatchSize, 8, BatchTimeoutMicros, 0), cfg(MaxBatchSize, 8, BatchTimeoutMicros, 10000)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Runnable (-want +got):\n%s", diff)
	}
}

func TestSnapAndCanonical(t *testing.T) {
	s := mustSpace(t, configs.SpaceSpec{
		{Name: MaxBatchSize, Min: i64(8), Max: i64(128), Scale: configs.ScalePow2},
		{Name: BatchTimeoutMicros, Values: []int64{0, 5000, 15000, 30000}},
	}, rules60)
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		// Off-grid values go to the nearest on each parameter's metric
		// (log for the batch: 50 is nearer 64 than 32).
		{"nearest", cfg(MaxBatchSize, 50, BatchTimeoutMicros, 4000), cfg(MaxBatchSize, 64, BatchTimeoutMicros, 5000)},
		// Beyond the ends: the ends. A timeout that breaks SLO/3 (here
		// 30000 ≥ 20000) snaps to the nearest one that does not.
		{"clamped and runnable", cfg(MaxBatchSize, 4096, BatchTimeoutMicros, 40000), cfg(MaxBatchSize, 128, BatchTimeoutMicros, 15000)},
		// Missing parameters take their fixed value first (TF's default
		// max_batch_size 1000 → 128).
		{"missing", cfg(BatchTimeoutMicros, 0), cfg(MaxBatchSize, 128, BatchTimeoutMicros, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.Snap(tc.in)); diff != "" {
				t.Errorf("Snap (-want +got):\n%s", diff)
			}
		})
	}
	// A stored configuration in another order is the same point.
	swapped := cfg(BatchTimeoutMicros, 5000, MaxBatchSize, 16)
	if got := s.canonical(swapped); !got.Equal(cfg(MaxBatchSize, 16, BatchTimeoutMicros, 5000)) {
		t.Errorf("canonical = %v", got)
	}
	if len(s.Check(swapped)) != 0 {
		t.Errorf("Check rejects a reordered configuration: %v", s.Check(swapped))
	}
	all, _ := s.Runnable(t.Context())
	var hist []Trial
	for _, c := range all {
		if !c.Equal(cfg(MaxBatchSize, 16, BatchTimeoutMicros, 5000)) {
			hist = append(hist, Trial{Config: c, Outcome: Succeeded})
		}
	}
	hist = append(hist, Trial{Config: swapped, Outcome: Failed})
	for _, st := range strategies() {
		sugg, err := st.Suggest(t.Context(), Request{Space: s, Objective: throughput, History: hist, N: 1, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(sugg) != 0 {
			t.Errorf("%s suggested %v, which ran (stored in another order)", st.Name(), sugg[0].Config)
		}
	}
}

// up_to_cores keeps 0 (TF's auto) and the counts the machine has cores
// for, and spans the unit cube with what is left.
func TestUpToCores(t *testing.T) {
	spec := configs.SpaceSpec{{Name: IntraOpParallelism, Values: []int64{0, 1, 2, 4, 8, 16}, UpToCores: true}}
	s := mustSpace(t, spec, Rules{SLO: time.Second, Cores: 2})
	p := s.Params()[0]
	if diff := cmp.Diff([]int64{0, 1, 2}, p.Values); diff != "" {
		t.Errorf("values on 2 cores (-want +got):\n%s", diff)
	}
	if x, _ := s.features(Config{{IntraOpParallelism, 2}}); x[0] != 1 {
		t.Errorf("the largest kept value sits at %v, want 1", x[0])
	}
	if s := mustSpace(t, spec, Rules{SLO: time.Second, Cores: 16}); len(s.Params()[0].Values) != 6 {
		t.Errorf("16 cores keep %v, want all 6 values", s.Params()[0].Values)
	}
	_, err := NewSpace(configs.SpaceSpec{{Name: IntraOpParallelism, Values: []int64{4, 8}, UpToCores: true}}, Rules{SLO: time.Second, Cores: 2})
	if err == nil || !strings.Contains(err.Error(), "space.tensorflow_intra_op_parallelism.up_to_cores") {
		t.Errorf("no value left: err = %v, want one naming the field", err)
	}
}
