package tuner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// TestStepVerdict: a step meets the SLO only when its quantile and error
// rate are within it and the rate was kept; an invalid measurement is no
// verdict.
func TestStepVerdict(t *testing.T) {
	ms := time.Millisecond
	slo := configs.SLO{Latency: configs.Duration(30 * ms), Quantile: 0.99, ErrorRate: 0.001}
	step := func(edit func(r *probe.Result)) *probe.Result {
		r := &probe.Result{Valid: true, StopReason: probe.StopMaxDuration, OfferedRate: 500, SentRate: 500, RateKept: true,
			QPS: 495, Duration: 3 * time.Second, Latency: probe.Percentiles{P50: 5 * ms, P90: 10 * ms, P99: 20 * ms},
			Server: probe.ServerMetrics{MeanBatchSize: 6, QueuingShare: 0.4}}
		if edit != nil {
			edit(r)
		}
		return r
	}
	tests := []struct {
		name   string
		r      *probe.Result
		meets  bool
		reason string // a substring of the reason when it does not meet
	}{
		// Within everything: meets; 1% short of the rate sent is pacing.
		{"meets", step(nil), true, ""},
		// The SLO quantile over the target.
		{"slow", step(func(r *probe.Result) { r.Latency.P99 = 31 * ms }), false, "P99 31ms > SLO 30ms"},
		// Errors over the budget (queue full).
		{"errors", step(func(r *probe.Result) { r.ErrorRate, r.Errors = 0.01, map[string]int64{"Unavailable": 15} }), false, "error rate"},
		// The server served 10% less than was sent: it did not keep up.
		{"short", step(func(r *probe.Result) { r.QPS = 450 }), false, "achieved 450.0 req/s of 500.0 sent"},
		// Every worker busy: the rate was not kept.
		{"not_kept", step(func(r *probe.Result) { r.RateKept, r.RateNote = false, "all 4096 workers busy" }), false, "offered rate not kept"},
		// Stopped early on a certain breach, whatever the partial figures say.
		{"early", step(func(r *probe.Result) { r.StopReason, r.StopDetail = probe.StopSLOBreach, "1.2% over 30ms" }), false, "1.2% over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := stepOf(tt.r, slo)
			if err != nil {
				t.Fatal(err)
			}
			if st.Meets != tt.meets || (!tt.meets && !strings.Contains(st.Reason, tt.reason)) {
				t.Errorf("meets %v reason %q, want %v with %q", st.Meets, st.Reason, tt.meets, tt.reason)
			}
			if st.MeanBatch != 6 || st.QueueShare != 0.4 || st.Quantile != tt.r.Latency.P99 || st.Offered != 500 {
				t.Errorf("step figures %+v not carried over", st)
			}
		})
	}
	_, err := stepOf(step(func(r *probe.Result) { r.Valid, r.InvalidReason = false, "generator CPU saturated" }), slo)
	if !errors.Is(err, errGeneratorLimited) || !strings.Contains(err.Error(), "CPU saturated") {
		t.Errorf("invalid step: %v, want errGeneratorLimited with the reason", err)
	}
}

// kneeServer is a synthetic server for measureCapacity: below its capacity
// it serves every request with p99 growing toward the SLO; above it the
// latency explodes and it achieves only 1.1 × capacity.
type kneeServer struct {
	capacity float64
	slo      time.Duration
	base     time.Duration
	loads    []probe.Load
	invalid  float64 // rates at or over this are generator-limited (0: none)
}

func (k *kneeServer) Measure(_ context.Context, load probe.Load, o *probe.MeasureOptions) (*probe.Result, error) {
	k.loads = append(k.loads, load)
	r := &probe.Result{Valid: true, StopReason: probe.StopStable, Load: load, Duration: o.MinDuration, RateKept: true}
	if !load.Open() { // the burst: a closed loop settles just over capacity
		r.QPS = 1.05 * k.capacity
		r.Latency = probe.Percentiles{P50: k.slo / 2, P99: k.slo * 3 / 2}
		return r, nil
	}
	rate := load.Rate
	r.OfferedRate, r.SentRate = rate, rate
	if k.invalid > 0 && rate >= k.invalid {
		r.Valid, r.InvalidReason = false, "pacing lag P99 12ms > 10ms"
		return r, nil
	}
	u := rate / k.capacity
	r.QPS = min(rate, 1.1*k.capacity)
	p99 := k.base + time.Duration(float64(k.slo-k.base)*u*u)
	if u > 1 {
		p99 = k.slo * 4
		r.StopReason, r.StopDetail = probe.StopSLOBreach, "certain breach"
		r.Duration = o.MinDuration / 2
	}
	r.Latency = probe.Percentiles{P50: p99 / 3, P90: p99 / 2, P99: p99}
	r.Server = probe.ServerMetrics{MeanBatchSize: 1 + 10*u, QueuingShare: 0.3 * u}
	return r, nil
}

// noSettle drops the pause after a breaking step for the test: the
// synthetic server has no backlog.
func noSettle(t *testing.T) {
	d := settleAfterBreach
	settleAfterBreach = 0
	t.Cleanup(func() { settleAfterBreach = d })
}

func capacityStudy(t *testing.T) *configs.Study {
	return testStudy(t, "")
}

// TestMeasureCapacity: the burst gives the start, the steps are open loop
// at the search's rates with the study's SLO for the early stop, and the
// capacity found is within the resolution of the server's.
func TestMeasureCapacity(t *testing.T) {
	noSettle(t)
	s := capacityStudy(t)
	for _, c := range []float64{40, 900, 12_000} {
		k := &kneeServer{capacity: c, slo: 30 * time.Millisecond, base: 5 * time.Millisecond}
		m, err := MeasureCapacity(context.Background(), k, s)
		if err != nil {
			t.Fatal(err)
		}
		if k.loads[0].Concurrency != s.Load.Concurrency || k.loads[1].Rate != m.Start {
			t.Errorf("capacity %g: first loads %v, want the burst at concurrency %d then the start %g", c, k.loads[:2], s.Load.Concurrency, m.Start)
		}
		r := m.Search
		if !r.Resolved || r.Capacity > c || r.Upper <= c || r.Upper > 1.05*r.Capacity*(1+1e-9) {
			t.Errorf("capacity %g: bracket [%g, %g) resolved %v: %s", c, r.Capacity, r.Upper, r.Resolved, r.Note)
		}
		if m.Knee == nil || m.Knee.OfferedRate != r.Capacity || m.Measuring <= 0 {
			t.Errorf("capacity %g: knee %v, measuring %s", c, m.Knee, m.Measuring)
		}
		v := scoreCapacity(m)
		if v.State != store.TrialSucceeded || !v.Feasible || *v.Objective != r.Capacity || v.Summary.MeanBatch == 0 {
			t.Errorf("capacity %g: verdict %+v", c, v)
		}
		if len(r.Steps) > 8 {
			t.Errorf("capacity %g: %d steps from a burst near it", c, len(r.Steps))
		}
	}

	// A generator that cannot offer 2 500 req/s to a server of 2 000: the
	// search goes on under the rate it could not offer and finds the
	// server's capacity, not the generator's.
	k := &kneeServer{capacity: 2000, slo: 30 * time.Millisecond, base: 5 * time.Millisecond, invalid: 2500}
	m, err := MeasureCapacity(context.Background(), k, s)
	if err != nil || m.GeneratorLimit != "" || !m.Search.Resolved || m.Search.Floor() || m.Search.Capacity < 2000/1.05 || m.Search.Capacity > 2000 {
		t.Errorf("server under the generator's limit: %v, limit %q, search %+v; want its capacity 2000, resolved", err, m.GeneratorLimit, m.Search)
	}
	// One a server of 3 000 req/s: the capacity found is the generator's
	// limit, a lower bound, said so; each rate it could not offer was
	// measured twice; when it cannot offer even the first rate, the trial
	// is invalid.
	k = &kneeServer{capacity: 3000, slo: 30 * time.Millisecond, base: 5 * time.Millisecond, invalid: 2500}
	if m, err = MeasureCapacity(context.Background(), k, s); err != nil || m.GeneratorLimit == "" {
		t.Fatalf("generator-limited: %v, limit %q", err, m.GeneratorLimit)
	}
	over := 0
	for i, l := range k.loads {
		if l.Open() && l.Rate >= 2500 {
			over++
			if i == 0 || k.loads[i-1].Rate != l.Rate {
				if i+1 == len(k.loads) || k.loads[i+1].Rate != l.Rate {
					t.Errorf("the generator-limited rate %g was not measured twice: %v", l.Rate, k.loads)
				}
			}
		}
	}
	v := scoreCapacity(m)
	if over == 0 || !v.Feasible || !strings.Contains(v.Reason, "capacity at least") || !m.Search.ClientBound || !m.Search.Floor() ||
		m.Search.Capacity >= 2500 || m.Search.Capacity < 2500/1.05 {
		t.Errorf("generator-limited verdict %+v, search %+v: want a lower bound within 5%% under 2500", v, m.Search)
	}
	k = &kneeServer{capacity: 2000, slo: 30 * time.Millisecond, base: 5 * time.Millisecond, invalid: 1}
	m, _ = MeasureCapacity(context.Background(), k, s)
	if v := scoreCapacity(m); v.State != store.TrialInvalid || v.Objective != nil || m.Search.Floor() {
		t.Errorf("nothing offered: verdict %+v, floor %v, want invalid", v, m.Search.Floor())
	}

	// A server that breaks the SLO even at the lowest rate: infeasible,
	// with the lowest step's reason.
	k = &kneeServer{capacity: 0.1, slo: 30 * time.Millisecond, base: 5 * time.Millisecond}
	m, err = MeasureCapacity(context.Background(), k, s)
	if err != nil {
		t.Fatal(err)
	}
	if v := scoreCapacity(m); v.Feasible || v.State != store.TrialSucceeded || !strings.Contains(v.Reason, "no rate met the SLO") || v.Summary.P99 == 0 {
		t.Errorf("nothing meets: verdict %+v", v)
	}
}

// Capacity makes the fake prober a CapacityProber: the running launch's
// capacity is testSurface's throughput, its latency near the knee
// testSurface's P99 (so that configurations the max_throughput tests find
// infeasible have a lower capacity under the same SLO).
func (p *fakeProber) Capacity(ctx context.Context, ep runtime.Endpoints, phase func(store.TrialState)) (*CapacityMeasurement, error) {
	launches := p.rt.launches()
	var n int
	fmt.Sscanf(strings.TrimPrefix(ep.GRPC, "fake:"), "%d", &n)
	bp, err := configs.DecodeBatching(launches[n-1].Batching)
	if err != nil {
		return nil, err
	}
	b := configs.Resolve(bp, 2)
	phase(store.TrialWarming)
	phase(store.TrialMeasuring)
	if p.hook != nil {
		if err := p.hook(ctx, n); err != nil {
			return nil, err
		}
	}
	qps, p99 := 100.0, 10*time.Millisecond
	if p.surface != nil {
		qps, p99 = p.surface(b)
	}
	slo := 30 * time.Millisecond
	// A P99 at the knee over the SLO moves the knee down in proportion.
	c := qps * math.Min(1, float64(slo)/float64(p99))
	return MeasureCapacity(ctx, &kneeServer{capacity: c, slo: slo, base: slo / 4, invalid: p.genLimit * c}, &configs.Study{
		Load: configs.Load{Concurrency: 8, MinDuration: configs.Duration(3 * time.Second), MaxDuration: configs.Duration(9 * time.Second)},
		SLO:  configs.SLO{Latency: configs.Duration(slo), Quantile: 0.99, ErrorRate: 0.001},
	})
}

var _ CapacityProber = (*fakeProber)(nil)

// runCapacityStudy runs the test study under max_capacity on testSurface
// with the fake prober, its generator unable to offer genLimit × a
// configuration's capacity or more (0: no limit).
func runCapacityStudy(t *testing.T, genLimit float64) (*configs.Study, *Report) {
	t.Helper()
	noSettle(t)
	s := testStudy(t, "")
	s.Objective = configs.ObjectiveMaxCapacity
	rt := &fakeRuntime{}
	tu := newTestTuner(t, s, storetest.Open(t), rt, &fakeProber{rt: rt, surface: testSurface, genLimit: genLimit}, nil)
	rep, err := tu.Run(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, rep
}

// TestCapacityRun: a study under max_capacity runs capacity trials through
// the tuner: every trial keeps its steps, the objective is the capacity,
// the recommendation carries the winner's capacity interval and the
// baseline's capacity for planning.
func TestCapacityRun(t *testing.T) {
	s, rep := runCapacityStudy(t, 0)
	var best float64
	for _, tr := range rep.Trials {
		if tr.State != store.TrialSucceeded {
			continue
		}
		if tr.Capacity == nil || len(tr.Capacity.Steps) < 2 || tr.Objective == nil || *tr.Objective != tr.Capacity.Capacity {
			t.Fatalf("trial %d: capacity %+v objective %v", tr.Seq, tr.Capacity, tr.Objective)
		}
		if tr.Feasible != (tr.Capacity.Capacity > 0) {
			t.Errorf("trial %d: feasible %v with capacity %g", tr.Seq, tr.Feasible, tr.Capacity.Capacity)
		}
		if tr.Role == store.RoleSearch && *tr.Objective > best {
			best = *tr.Objective
		}
	}
	rec := rep.Recommendation
	if rec == nil {
		t.Fatalf("no recommendation: %s", rep.Run.Detail)
	}
	if rec.Capacity != rec.Objective || rec.Capacity < best/1.06 || !(rec.CapacityLow <= rec.Capacity && rec.Capacity <= rec.CapacityHigh) {
		t.Errorf("recommendation capacity %g [%g, %g], objective %g; best search capacity %g", rec.Capacity, rec.CapacityLow, rec.CapacityHigh, rec.Objective, best)
	}
	var base *store.CapacityEstimate
	for i, c := range rec.Capacities {
		if strings.HasPrefix(c.Label, "baseline") {
			base = &rec.Capacities[i]
		}
	}
	// TF's defaults (max_batch_size 1000) reach a P99 over 500 ms on this
	// surface: a small capacity, but one.
	if base == nil || base.Repeats != s.Confirmation.Repeats || base.Capacity >= rec.CapacityLow {
		t.Errorf("baseline capacity %+v, want measured in every repeat and under the winner's %g", base, rec.CapacityLow)
	}
	if _, err := capacity.Replicas(100_000, rec.CapacityLow, capacity.DefaultHeadroom); err != nil {
		t.Error(err)
	}
}

// TestCapacityRunClientBound: when the load generator cannot offer the
// steps above a server's capacity, every repeat's capacity is a lower
// bound: the confirmation says so, the recommendation counts them, and
// the plan tells the user a server may carry more than planned.
func TestCapacityRunClientBound(t *testing.T) {
	// The burst starts the search at 0.945 × capacity, which meets; the
	// generator cannot offer 0.98 × capacity or more.
	s, rep := runCapacityStudy(t, 0.98)
	rec := rep.Recommendation
	if rec == nil {
		t.Fatalf("no recommendation: %s", rep.Run.Detail)
	}
	if rec.CapacityRepeats < s.Confirmation.Repeats || rec.CapacityFloors != rec.CapacityRepeats {
		t.Errorf("recommendation: %d repeats, %d lower bounds; want every one of at least %d", rec.CapacityRepeats, rec.CapacityFloors, s.Confirmation.Repeats)
	}
	if !strings.Contains(rec.Note, "only a lower bound in") || !strings.Contains(rec.Note, "load generator") {
		t.Errorf("recommendation note %q does not say the capacity is a lower bound", rec.Note)
	}
	for _, c := range rec.Capacities {
		if c.Floors != c.Repeats {
			t.Errorf("%s: %d lower bounds of %d repeats", c.Label, c.Floors, c.Repeats)
		}
	}
	plan, err := MakePlan(rec, 100_000, capacity.DefaultHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	if r := plan.Rows[0]; r.Replicas == 0 || r.Floors != rec.CapacityFloors || !strings.Contains(r.Note, "may carry more than planned") {
		t.Errorf("recommended row %+v: want a count and the note", r)
	}
}
