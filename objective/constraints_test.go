package objective

import (
	"slices"
	"testing"
	"time"
)

func TestConstraintsBreaches(t *testing.T) {
	ms := time.Millisecond
	c := Constraints{SLO: 10 * ms, ErrorBudget: 0.01}
	kept := &Rate{Sent: 500, Achieved: 490, Shortfall: RateShortfall} // 2% short: kept
	short := &Rate{Sent: 500, Achieved: 489, Shortfall: RateShortfall}
	tests := []struct {
		name    string
		latency time.Duration
		errRate float64
		rate    *Rate
		want    []Breach
	}{
		{"closed loop, within", 10 * ms, 0.01, nil, nil},
		{"closed loop, slow", 11 * ms, 0, nil, []Breach{LatencyOver}},
		{"closed loop, errors", 5 * ms, 0.02, nil, []Breach{ErrorsOver}},
		{"open loop, rate kept", 5 * ms, 0, kept, nil},
		{"open loop, rate short", 5 * ms, 0, short, []Breach{RateShort}},
		// The SLO binds an open-loop measurement too (min_latency).
		{"open loop, rate kept but slow", 11 * ms, 0, kept, []Breach{LatencyOver}},
		{"everything", 11 * ms, 0.5, short, []Breach{LatencyOver, ErrorsOver, RateShort}},
	}
	for _, tt := range tests {
		got := c.Breaches(tt.latency, tt.errRate, tt.rate)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: breaches %v, want %v", tt.name, got, tt.want)
		}
		if c.Meets(tt.latency, tt.errRate, tt.rate) != (len(tt.want) == 0) {
			t.Errorf("%s: Meets disagrees with Breaches", tt.name)
		}
	}
	for b, want := range map[Breach]string{
		LatencyOver: "p99 11ms > SLO 10ms",
		ErrorsOver:  "error rate 0.5000 > budget 0.0100",
		RateShort:   "achieved 489.0 req/s of 500.0 sent",
	} {
		if got := c.Describe(b, "p99", 11*ms, 0.5, short); got != want {
			t.Errorf("Describe(%d) = %q, want %q", b, got, want)
		}
	}
}
