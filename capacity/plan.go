package capacity

import (
	"fmt"
	"math"
)

// DefaultHeadroom is the share of a server's capacity that planning uses,
// leaving the rest for daily swings and failover (seed 001 §3.3: 0.65).
const DefaultHeadroom = 0.65

// Replicas is the number of servers that carry target requests per second
// when each is loaded to capacity × headroom: ceil(target / (capacity ×
// headroom)). capacity should be a lower bound (a confirmation interval's
// low end), so that the fleet is sized on what a server surely sustains.
func Replicas(target, capacity, headroom float64) (int, error) {
	switch {
	case !(target > 0) || math.IsInf(target, 0):
		return 0, fmt.Errorf("target rate must be > 0 req/s, got %g", target)
	case !(headroom > 0 && headroom <= 1):
		return 0, fmt.Errorf("headroom must be in (0, 1], got %g", headroom)
	case !(capacity > 0) || math.IsInf(capacity, 0):
		return 0, fmt.Errorf("capacity must be > 0 req/s, got %g", capacity)
	}
	// The epsilon keeps float rounding (100000 / (1000 × 0.5) computed as
	// 200.00000000001) from adding a server.
	x := target / (capacity * headroom)
	n := math.Ceil(x * (1 - 1e-12))
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("%g req/s at %g req/s per server needs over %d servers", target, capacity*headroom, math.MaxInt32)
	}
	return int(n), nil
}
