package sim

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func capTrial(t *testing.T, mbs, timeout int64, seed uint64) CapacityTrial {
	t.Helper()
	return CapacityTrial{
		Trial: Trial{Model: loadModel(t, "ranker"), Batching: batching(mbs, timeout, 1, 16), Calibration: zeroHost(),
			Warmup: time.Second, Duration: 2 * time.Second, Seed: seed},
		BurstConcurrency: 16, SLO: 50 * time.Millisecond, ErrorBudget: 0.01,
	}
}

// TestCapacityOfADeviceBoundServer: with batches of one row and no host
// cost, the device's warm time per row bounds what any open-loop rate can
// sustain. The search brackets a capacity under that bound but not far
// under it, to the 5% resolution, and keeps every step with its verdict.
func TestCapacityOfADeviceBoundServer(t *testing.T) {
	c := capTrial(t, 1, 0, 1)
	r, err := MeasureCapacity(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	bound := 1 / c.Trial.Model.Accelerator.WarmTime(1).Seconds()
	if !r.Resolved || r.Capacity > bound*1.02 || r.Capacity < 0.7*bound {
		t.Fatalf("capacity %.1f (resolved %v, %s), want within [0.7, 1.02] of the device bound %.1f", r.Capacity, r.Resolved, r.Note, bound)
	}
	if r.Upper > r.Capacity*1.05+1e-9 {
		t.Errorf("bracket [%g, %g) wider than 5%%", r.Capacity, r.Upper)
	}
	if r.Burst == nil || r.Burst.QPS <= 0 || r.Start <= 0 {
		t.Errorf("burst %+v, start %g: want the burst that suggested the start", r.Burst, r.Start)
	}
	for _, s := range r.Steps {
		if s.Meets == (s.Reason != "") || s.Duration != 2*time.Second {
			t.Errorf("step %+v: verdict and reason disagree, or the step's duration is not the trial's", s)
		}
		if s.Offered == r.Capacity && (!s.Meets || s.Achieved < 0.98*s.Offered) {
			t.Errorf("the step at the capacity %+v does not meet the SLO", s)
		}
		if s.Offered == r.Upper && s.Meets {
			t.Errorf("the step at the upper end %+v meets the SLO", s)
		}
	}
}

// TestCapacityIsDeterministicPerSeed: the same seed gives the same
// measurement, another seed another one (the repeat noise a surface
// records), and a step's figures depend on its rate, not on when the
// search asked for it.
func TestCapacityIsDeterministicPerSeed(t *testing.T) {
	ctx := context.Background()
	a, err := MeasureCapacity(ctx, capTrial(t, 8, 2000, 7))
	if err != nil {
		t.Fatal(err)
	}
	b, err := MeasureCapacity(ctx, capTrial(t, 8, 2000, 7))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different result (-first +second):\n%s", diff)
	}
	c := capTrial(t, 8, 2000, 7)
	last := a.Steps[len(a.Steps)-1]
	again, _, err := c.Step(ctx, last.Offered)
	if err != nil {
		t.Fatal(err)
	}
	if again.Achieved != last.Achieved || again.Quantile != last.Quantile {
		t.Errorf("step at %g alone: %+v, in the search: %+v", last.Offered, again, last)
	}
	other, err := MeasureCapacity(ctx, capTrial(t, 8, 2000, 8))
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(a.Steps, other.Steps) {
		t.Errorf("seeds 7 and 8 measured identical steps")
	}
}

// TestCapacityAgreesWithAFineSweep: a sweep of 20 rates around the found
// capacity (each a step with the same seed rule) puts the knee where the
// search put it, within the resolution (BracketsAgree); and batching (8 rows, a 2 ms
// timeout) buys capacity over single-row batches, as it does on the
// stand-in's device.
func TestCapacityAgreesWithAFineSweep(t *testing.T) {
	ctx := context.Background()
	single, err := MeasureCapacity(ctx, capTrial(t, 1, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	c := capTrial(t, 8, 2000, 3)
	r, err := MeasureCapacity(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Capacity < 1.5*single.Capacity {
		t.Errorf("capacity with batches of 8: %.1f, with batches of 1: %.1f; want at least 1.5x", r.Capacity, single.Capacity)
	}
	sweep, err := SweepCapacity(ctx, c, 0.6*r.Capacity, 1.4*r.Capacity, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(sweep.Steps) != 20 {
		t.Fatalf("%d sweep steps, want 20", len(sweep.Steps))
	}
	// Each step near the knee has its own noise (the P99 jumps from 26 to
	// 56 ms there), so the two brackets agree within the resolution
	// rather than exactly; their lower ends are within two resolutions.
	if !BracketsAgree(r.Result, sweep, 0.05) {
		t.Errorf("search [%.1f, %.1f), sweep [%.1f, %.1f): disagree beyond 5%%", r.Capacity, r.Upper, sweep.Capacity, sweep.Upper)
	}
	if ratio := r.Capacity / sweep.Capacity; math.Abs(ratio-1) > 0.10 {
		t.Errorf("search %.1f, sweep %.1f (ratio %.3f): want within 10%%", r.Capacity, sweep.Capacity, ratio)
	}
	far := sweep
	far.Capacity, far.Upper = 2*sweep.Capacity, 2*sweep.Upper
	if BracketsAgree(r.Result, far, 0.05) {
		t.Errorf("a bracket twice as high agrees")
	}
}

func TestCapacityLoadFailureAndBadInput(t *testing.T) {
	ctx := context.Background()
	c := capTrial(t, 4096, 0, 1) // beyond the ranker's device memory
	r, err := MeasureCapacity(ctx, c)
	if err != nil || !r.LoadFailed || !r.OOM || len(r.Steps) != 0 {
		t.Errorf("OOM config: %+v, %v; want LoadFailed and OOM with no steps", r, err)
	}
	c.Search.Start = 100 // no burst: the first step finds the failure
	r, err = MeasureCapacity(ctx, c)
	if err != nil || !r.LoadFailed || !r.OOM {
		t.Errorf("OOM config from a given start: %+v, %v", r, err)
	}
	for _, mod := range []func(*CapacityTrial){
		func(c *CapacityTrial) { c.SLO = 0 },
		func(c *CapacityTrial) { c.ErrorBudget = 1 },
		func(c *CapacityTrial) { c.Quantile = 0.42 },
		func(c *CapacityTrial) { c.BurstConcurrency = 0 },
	} {
		c := capTrial(t, 8, 0, 1)
		mod(&c)
		if _, err := MeasureCapacity(ctx, c); !errors.Is(err, ErrTrial) {
			t.Errorf("%+v: %v, want ErrTrial", c, err)
		}
	}
}
