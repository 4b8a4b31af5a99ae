package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// knee is a synthetic server: it meets the SLO up to capacity and above it
// achieves at most saturate req/s.
func knee(capacity, saturate float64, calls *int) MeasureFunc {
	return func(_ context.Context, rate float64) (Step, error) {
		*calls++
		s := Step{Achieved: min(rate, saturate), Quantile: time.Duration(float64(40*time.Millisecond) * rate / capacity)}
		s.Meets = rate <= capacity
		if !s.Meets {
			s.Reason = "p99 over the SLO"
		}
		return s, nil
	}
}

// TestSearchBracketsTheKnee: over capacities and starts four orders of
// magnitude apart, the result brackets the true capacity within the
// resolution, in at most MaxSteps, and every step is kept.
func TestSearchBracketsTheKnee(t *testing.T) {
	worst := 0
	for _, c := range []float64{3, 97, 1000, 1720, 25_000} {
		for _, startFactor := range []float64{0.01, 0.3, 0.9, 1, 1.1, 3, 40} {
			for _, slo := range []time.Duration{0, 40 * time.Millisecond} {
				calls := 0
				r, err := Search(context.Background(), knee(c, c*1.3, &calls), Options{Start: c * startFactor, SLO: slo, MaxSteps: 20})
				if err != nil {
					t.Fatal(err)
				}
				if !r.Resolved || r.Capacity > c || r.Upper <= c || r.Upper > r.Capacity*1.05+1e-9 {
					t.Errorf("capacity %g, start %g×, slo %v: got [%g, %g) resolved %v after %d steps: %s",
						c, startFactor, slo, r.Capacity, r.Upper, r.Resolved, len(r.Steps), r.Note)
				}
				if len(r.Steps) != calls {
					t.Errorf("%d steps kept of %d measured", len(r.Steps), calls)
				}
				if startFactor >= 0.3 && startFactor <= 3 {
					worst = max(worst, calls)
				}
				knee, ok := r.Knee()
				if !ok || knee.Offered != r.Capacity {
					t.Errorf("knee %+v, want the step at %g", knee, r.Capacity)
				}
			}
		}
	}
	// From a start within 3x of the truth, the 5% bracket takes at most 8
	// steps: about 3 fixed-load trials' worth at the probe's step length.
	t.Logf("worst steps from a start within 3x: %d", worst)
	if worst > 8 {
		t.Errorf("a start within 3x took %d steps, want <= 8", worst)
	}
}

// TestSearchEnds: a server that meets nothing, one that meets everything
// up to Max, a measuring error, and bad options.
func TestSearchEnds(t *testing.T) {
	ctx := context.Background()
	calls := 0
	r, err := Search(ctx, knee(0.1, 0.1, &calls), Options{Start: 100})
	if err != nil || r.Capacity != 0 || r.Resolved || !strings.Contains(r.Note, "even at the lowest rate") {
		t.Errorf("nothing meets: %+v, %v", r, err)
	}
	r, err = Search(ctx, knee(1e9, 1e9, &calls), Options{Start: 1000, Max: 5000})
	if err != nil || r.Capacity != 5000 || !r.Bounded || !strings.Contains(r.Note, "highest rate allowed") {
		t.Errorf("everything meets: %+v, %v", r, err)
	}
	boom := errors.New("server exited")
	n := 0
	r, err = Search(ctx, func(_ context.Context, rate float64) (Step, error) {
		n++
		if n == 3 {
			return Step{}, boom
		}
		return Step{Meets: true, Achieved: rate}, nil
	}, Options{Start: 10})
	if !errors.Is(err, boom) || len(r.Steps) != 2 || r.Capacity != 15 {
		t.Errorf("measuring error: %+v, %v", r, err)
	}
	for _, o := range []Options{{}, {Start: math.Inf(1)}, {Start: 1, Resolution: 1.5}, {Start: 1, Min: 10, Max: 5}, {Start: 1, MaxSteps: 1}} {
		if _, err := Search(ctx, knee(1, 1, &calls), o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("options %+v: %v, want ErrBadOptions", o, err)
		}
	}
}

// TestSaturationGuidesTheStepDown: a first step far above a server that
// saturates sends the next step to just under what it achieved, not to
// half the offered rate.
func TestSaturationGuidesTheStepDown(t *testing.T) {
	calls := 0
	r, _ := Search(context.Background(), knee(800, 900, &calls), Options{Start: 1200})
	if len(r.Steps) < 2 || math.Abs(r.Steps[1].Offered-0.9*900) > 1e-9 {
		t.Fatalf("second step at %g, want 0.9 × the 900 achieved", r.Steps[1].Offered)
	}
}

func TestReplicas(t *testing.T) {
	for _, c := range []struct {
		target, capacity, headroom float64
		want                       int
	}{
		{100_000, 1000, 0.5, 200},
		{100_000, 1720, 0.65, 90},
		{1, 1e6, 1, 1},
		{8000, 8000, 0.65, 2},
	} {
		got, err := Replicas(c.target, c.capacity, c.headroom)
		if err != nil || got != c.want {
			t.Errorf("Replicas(%g, %g, %g) = %d, %v; want %d", c.target, c.capacity, c.headroom, got, err, c.want)
		}
	}
	for _, bad := range [][3]float64{{0, 1, 0.5}, {1, 0, 0.5}, {1, 1, 0}, {1, 1, 1.2}, {math.NaN(), 1, 0.5}, {1e300, 1e-300, 1}} {
		if _, err := Replicas(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("Replicas(%v) accepted", bad)
		}
	}
	if _, err := Replicas(1, 1, 1.2); err == nil || !strings.Contains(err.Error(), "headroom") {
		t.Errorf("error %v does not name the headroom", err)
	}
}

func TestStartFromBurst(t *testing.T) {
	if got := StartFromBurst(1000, 20*time.Millisecond, 40*time.Millisecond); got != 900 {
		t.Errorf("under the SLO: %g, want 900", got)
	}
	if got := StartFromBurst(1000, 80*time.Millisecond, 40*time.Millisecond); got != 450 {
		t.Errorf("twice the SLO: %g, want 450", got)
	}
}

// TestPlanningCapacity: the lower bound is planned on while it is at least
// half the mean; below that the interval is refused, with the interval
// and the remedy in the message; no interval plans on the mean.
func TestPlanningCapacity(t *testing.T) {
	for _, c := range []struct{ mean, low, high, want float64 }{
		{1196.1, 1189.1, 1203.2, 1189.1},
		{1000, 500, 1500, 500},   // exactly MinLowShare
		{1000, 0, 0, 1000},       // one repeat: no interval
		{1000, 1000, 1000, 1000}, // one repeat, stored as its mean
	} {
		got, err := PlanningCapacity(c.mean, c.low, c.high)
		if err != nil || got != c.want {
			t.Errorf("PlanningCapacity(%g, %g, %g) = %g, %v; want %g", c.mean, c.low, c.high, got, err, c.want)
		}
	}
	// TF's defaults on the stand-in ranker, 210.7 and 108.9 req/s over two
	// repeats (experiments/capacity/results/ranker-capacity-30trials-2026-12-07.txt).
	for _, c := range [][3]float64{{151.5, 2.3, 10025.3}, {1000, 499.9, 1500}} {
		_, err := PlanningCapacity(c[0], c[1], c[2])
		if !errors.Is(err, ErrWideInterval) || !strings.Contains(err.Error(), fmt.Sprintf("[%.1f, %.1f]", c[1], c[2])) ||
			!strings.Contains(err.Error(), "confirmation.max_repeats") {
			t.Errorf("PlanningCapacity(%v): %v, want ErrWideInterval giving the interval and the remedy", c, err)
		}
	}
	if _, err := PlanningCapacity(0, 0, 0); err == nil {
		t.Error("no capacity accepted")
	}
}

// TestFloor: a capacity is a lower bound when the search met the SLO at
// its highest rate allowed, or the generator could not offer more; never
// when nothing met.
func TestFloor(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want bool
	}{
		{Result{Capacity: 900, Upper: 940, Resolved: true}, false},
		{Result{Capacity: 900, ClientBound: true}, true},
		{Result{Capacity: 900, Bounded: true}, true},
		{Result{Capacity: 0, ClientBound: true}, false},
	} {
		if got := c.r.Floor(); got != c.want {
			t.Errorf("%+v: Floor %v, want %v", c.r, got, c.want)
		}
	}
}

// TestSearchUnderTheGeneratorsCeiling: a rate the generator cannot offer
// is no verdict: over a met rate the search bisects under it, finds a
// server's capacity below it, and ends at the ceiling, a lower bound said
// so, when the server sustains more; before any rate met it ends the
// search with the error.
func TestSearchUnderTheGeneratorsCeiling(t *testing.T) {
	ceiling := func(limit float64, m MeasureFunc, tried *[]float64) MeasureFunc {
		return func(ctx context.Context, rate float64) (Step, error) {
			*tried = append(*tried, rate)
			if rate >= limit {
				return Step{}, fmt.Errorf("%w: pacing lag", ErrNotOffered)
			}
			return m(ctx, rate)
		}
	}
	for _, slo := range []time.Duration{0, 40 * time.Millisecond} {
		// The server's capacity under the ceiling: found, resolved.
		var tried []float64
		calls := 0
		r, err := Search(context.Background(), ceiling(1150, knee(1000, 1200, &calls), &tried), Options{Start: 800, SLO: slo})
		if err != nil || !r.Resolved || r.ClientBound || r.Floor() || r.Capacity > 1000 || r.Upper <= 1000 || r.Ceiling < 1150 {
			t.Errorf("slo %v: capacity 1000 under a ceiling of 1150: [%g, %g) resolved %v client %v, %v; tried %v", slo, r.Capacity, r.Upper, r.Resolved, r.ClientBound, err, tried)
		}
		// Over it: the capacity is the ceiling's, within the resolution.
		tried, calls = nil, 0
		r, err = Search(context.Background(), ceiling(1300, knee(2000, 2400, &calls), &tried), Options{Start: 700, SLO: slo})
		if err != nil || !r.ClientBound || !r.Floor() || r.Resolved || r.Capacity >= 1300 || r.Capacity < 1300/1.05 || r.Ceiling < 1300 || r.Ceiling > r.Capacity*1.05 ||
			!strings.Contains(r.Note, "could not offer") || len(r.Steps) != calls {
			t.Errorf("slo %v: capacity 2000 over a ceiling of 1300: %+v, %v; tried %v", slo, r, err, tried)
		}
		if len(tried) > 12 {
			t.Errorf("slo %v: %d rates tried under a ceiling: %v", slo, len(tried), tried)
		}
	}
	// Not even the first rate offered: the search ends with the error.
	var tried []float64
	calls := 0
	r, err := Search(context.Background(), ceiling(500, knee(2000, 2400, &calls), &tried), Options{Start: 700})
	if !errors.Is(err, ErrNotOffered) || r.Capacity != 0 || r.Floor() || len(tried) != 1 {
		t.Errorf("first rate not offered: %+v, %v; tried %v", r, err, tried)
	}
}
