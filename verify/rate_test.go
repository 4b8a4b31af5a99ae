package verify

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/store"
)

// TestRateOf: a soak's default rate is the capacity a fleet is planned on
// × headroom; a recommendation without a capacity, or whose interval is
// too wide to plan on, has none, and the error says which.
func TestRateOf(t *testing.T) {
	rate, src, err := RateOf(&store.Recommendation{Seq: 2, Run: 3, Capacity: 1000, CapacityLow: 900, CapacityHigh: 1100}, 0.65)
	if err != nil || rate != 585 || src != "capacity_low 900.0 x headroom 0.65" {
		t.Errorf("RateOf = %g, %q, %v; want 585 from the lower bound", rate, src, err)
	}
	if rate, src, err = RateOf(&store.Recommendation{Capacity: 1000}, 0.5); err != nil || rate != 500 || !strings.Contains(src, "no interval") {
		t.Errorf("one repeat: %g, %q, %v; want the mean × headroom, said so", rate, src, err)
	}
	_, _, err = RateOf(&store.Recommendation{Seq: 2, Run: 3, Capacity: 151.5, CapacityLow: 2.3, CapacityHigh: 10025.3}, 0.65)
	if !errors.Is(err, ErrNoRate) || !errors.Is(err, capacity.ErrWideInterval) || !strings.Contains(err.Error(), "run 3") {
		t.Errorf("wide interval: %v, want ErrNoRate and ErrWideInterval naming the run", err)
	}
	_, _, err = RateOf(&store.Recommendation{Seq: 2, Run: 3, Objective: 1700}, 0.65)
	if !errors.Is(err, ErrNoRate) || errors.Is(err, capacity.ErrWideInterval) || !strings.Contains(err.Error(), "no measured capacity") {
		t.Errorf("no capacity: %v", err)
	}
}
