package replay

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/search"
)

// UNIT-TEST FIXTURE ONLY. syntheticSurface is a made-up performance surface
// computed from a closed-form toy model of a batching server, with
// multiplicative noise. It exists so the replay harness, the benchmark and
// the strategies can be exercised before surfaces recorded from the
// stand-in exist. Its figures are not measurements and must never be
// recorded under experiments/ as results.
func syntheticSurface(t testing.TB, seed uint64, repeats int) *Surface {
	t.Helper()
	i64 := func(v int64) *int64 { return &v }
	h := Header{
		Format:      Format,
		Name:        "synthetic-fixture",
		Source:      "search/replay/fixture_test.go (unit-test fixture, not a measurement)",
		Objective:   search.MaxThroughput,
		Concurrency: 32,
		// The toy has no gRPC thread limit: say so, as a study that pins
		// --grpc_max_threads would, instead of letting TF's default (8 on
		// 2 cores) claim that no batch holds more than 8 rows.
		Fixed:       map[string]int64{search.GRPCMaxThreads: 256},
		SLO:         Duration(25e6), // 25ms: batch_timeout_micros must stay below 8333
		ErrorBudget: 0.01,
		Cores:       2,
		GPUs:        1,
		Space: []configs.ParamSpec{
			{Name: search.MaxBatchSize, Min: i64(1), Max: i64(64), Scale: configs.ScalePow2},
			{Name: search.BatchTimeoutMicros, Values: []int64{0, 500, 1000, 2000, 5000, 8000, 10000, 20000}},
			{Name: search.NumBatchThreads, Values: []int64{1, 2, 4}},
			{Name: search.MaxEnqueuedBatches, Values: []int64{2, 8, 32}},
			{Name: search.IntraOpParallelism, Values: []int64{0, 1}},
			{Name: search.InterOpParallelism, Values: []int64{0, 1}},
		},
	}
	s, err := NewSurface(h)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	runnable, err := s.Space().Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range runnable {
		vals := make([]int64, len(c))
		for i, a := range c {
			vals[i] = a.Value
		}
		for range repeats {
			s.Add(toyMeasure(vals, r))
		}
	}
	return s
}

// toyMeasure is the fixture's toy model (see syntheticSurface).
func toyMeasure(v []int64, r *rand.Rand) Measurement {
	b, tau, n, q, intra, inter := float64(v[0]), float64(v[1])/1000, float64(v[2]), float64(v[3]), v[4], v[5]
	m := Measurement{Config: v}
	if b*n > 64 {
		m.OOM = true
		return m
	}
	const c = 32.0
	eff := func(x int64) float64 {
		if x == 0 {
			return 2
		}
		return float64(x)
	}
	slow := 1.0
	if p := eff(intra) * eff(inter); p > 2 {
		slow = 1 + 0.15*(p-2)
	}
	if intra == 1 {
		slow *= 1.1
	}
	exec := func(k float64) float64 { return (2.0 + 0.25*math.Pow(k, 0.85)) * slow } // ms
	k0 := math.Max(1, c/(2*n))
	k := math.Min(b, k0*(1+tau/exec(b)))
	threads := math.Min(n, 1.6)
	qps := threads * k / exec(k) * 1000
	errRate := math.Max(0, (c-q*k*n)/c) * 0.3
	p99 := (c/qps*1000*1.8 + 0.9*tau) * 1000 // µs
	m.QPS = qps * (1 + 0.04*r.NormFloat64())
	m.P99Micros = p99 * (1 + 0.08*r.NormFloat64())
	m.ErrorRate = math.Max(0, errRate*(1+0.1*r.NormFloat64()))
	return m
}

// UNIT-TEST FIXTURE ONLY. syntheticCPUSurface is a second made-up surface
// (a toy CPU server at a fixed open-loop rate, objective min_latency) with a
// different shape from syntheticSurface, so that strategies are not tuned
// to one toy. Not a measurement; never to be recorded as a result.
func syntheticCPUSurface(t testing.TB, seed uint64, repeats int) *Surface {
	t.Helper()
	h := Header{
		Format:      Format,
		Name:        "synthetic-cpu-fixture",
		Source:      "search/replay/fixture_test.go (unit-test fixture, not a measurement)",
		Objective:   search.MinLatency,
		Rate:        800,
		SLO:         Duration(20e6),
		ErrorBudget: 0.01,
		Cores:       2,
		Space: []configs.ParamSpec{
			{Name: search.MaxBatchSize, Values: []int64{1, 2, 4, 8, 16, 32, 64, 128}},
			{Name: search.BatchTimeoutMicros, Values: []int64{0, 200, 500, 1000, 2000, 5000}},
			{Name: search.NumBatchThreads, Values: []int64{1, 2, 4}},
			{Name: search.MaxEnqueuedBatches, Values: []int64{1, 4, 16}},
			{Name: search.IntraOpParallelism, Values: []int64{1, 2, 4}},
			{Name: search.InterOpParallelism, Values: []int64{1, 2}},
		},
	}
	s, err := NewSurface(h)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	runnable, err := s.Space().Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range runnable {
		vals := make([]int64, len(c))
		for i, a := range c {
			vals[i] = a.Value
		}
		for range repeats {
			s.Add(toyCPU(vals, r))
		}
	}
	return s
}

func toyCPU(v []int64, r *rand.Rand) Measurement {
	b, tau, n, q, intra, inter := float64(v[0]), float64(v[1])/1000, float64(v[2]), float64(v[3]), float64(v[4]), float64(v[5])
	const rate = 800.0
	demand := n * intra * (1 + 0.2*(inter-1))
	over := math.Max(1, demand/2)
	exec := func(k float64) float64 {
		return (0.4 + 0.15*k) / math.Pow(math.Min(intra, 2), 0.7) * math.Pow(over, 1.2)
	}
	k := math.Min(b, math.Max(1, rate*(tau+exec(b)/2)/1000))
	capacity := math.Min(n, 2) * k / exec(k) * 1000 / math.Pow(over, 0.3)
	rho := rate / capacity
	m := Measurement{Config: v}
	qps := rate
	var p99 float64
	if rho >= 0.97 {
		qps = capacity
		p99 = 10 * (tau + exec(k)) * (1 + 40/q)
		rho = 0.97
	} else {
		p99 = tau + exec(k)*(1+2*rho/(1-rho))
	}
	errRate := math.Max(0, rho-0.7) * (4 / q) * 0.1
	m.QPS = qps * (1 + 0.01*r.NormFloat64())
	m.P99Micros = p99 * 1000 * (1 + 0.06*r.NormFloat64())
	m.ErrorRate = math.Max(0, errRate*(1+0.1*r.NormFloat64()))
	return m
}

// UNIT-TEST FIXTURE ONLY. smallSurface is syntheticSurface's toy on a
// 36-point, three-parameter slice (threads 2, no intra/inter tuning), for
// fast tests. Not a measurement.
func smallSurface(t testing.TB, seed uint64, repeats int) *Surface {
	t.Helper()
	h := Header{
		Format:      Format,
		Name:        "small-fixture",
		Source:      "search/replay/fixture_test.go (unit-test fixture, not a measurement)",
		Objective:   search.MaxThroughput,
		Concurrency: 32,
		// The toy has no gRPC thread limit: say so, as a study that pins
		// --grpc_max_threads would, instead of letting TF's default (8 on
		// 2 cores) claim that no batch holds more than 8 rows.
		Fixed:       map[string]int64{search.GRPCMaxThreads: 256},
		SLO:         Duration(25e6),
		ErrorBudget: 0.01,
		Cores:       2,
		GPUs:        1,
		Space: []configs.ParamSpec{
			{Name: search.MaxBatchSize, Values: []int64{4, 8, 16, 32}},
			{Name: search.BatchTimeoutMicros, Values: []int64{0, 2000, 8000, 20000}},
			{Name: search.MaxEnqueuedBatches, Values: []int64{2, 8, 32}},
		},
	}
	s, err := NewSurface(h)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 13))
	runnable, err := s.Space().Runnable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range runnable {
		b, _ := c.Get(search.MaxBatchSize)
		tau, _ := c.Get(search.BatchTimeoutMicros)
		q, _ := c.Get(search.MaxEnqueuedBatches)
		for range repeats {
			m := toyMeasure([]int64{b, tau, 2, q, 0, 1}, r)
			m.Config = []int64{b, tau, q}
			if err := s.Add(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}
