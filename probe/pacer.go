package probe

import (
	"math"
	"math/rand/v2"
	"time"
)

// Pacer decides when an open-loop run sends each request. It is a pure
// schedule: given the time since the run began and the number of requests
// already sent, Pace says how long to wait before sending the next one
// (zero or negative: it is already due; the intended send time is
// elapsed+wait either way) and whether to stop. Invalid settings stop at
// once; a Pacer never panics.
type Pacer interface {
	Pace(elapsed time.Duration, hits uint64) (wait time.Duration, stop bool)
	// Rate is the intended request rate per second at elapsed.
	Rate(elapsed time.Duration) float64
}

// ConstantPacer sends Freq requests per second at even spacing: request n
// is due at n/Freq seconds.
type ConstantPacer struct {
	Freq float64
}

var _ Pacer = ConstantPacer{}

// Pace implements Pacer.
func (p ConstantPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if !(p.Freq > 0) || math.IsInf(p.Freq, 0) {
		return 0, true
	}
	due := time.Duration(float64(hits) / p.Freq * float64(time.Second))
	return due - elapsed, false
}

// Rate implements Pacer.
func (p ConstantPacer) Rate(time.Duration) float64 { return p.Freq }

// PoissonPacer sends requests as a Poisson process of rate Freq: the gaps
// between intended send times are independent exponential variables, drawn
// from a PCG generator seeded with Seed, so two runs with the same seed
// offer exactly the same schedule. Request 0 is due at time 0.
//
// It remembers the last due time it computed, so it is meant to be asked
// for hits in increasing order (as a dispatcher does); asking for an earlier
// hit replays the sequence from the start. Not safe for concurrent use.
type PoissonPacer struct {
	freq float64
	seed uint64
	rng  *rand.Rand
	hit  uint64        // hits whose due time is in due
	due  time.Duration // due time of request number hit
}

var _ Pacer = (*PoissonPacer)(nil)

// NewPoissonPacer returns a Poisson pacer of freq requests per second.
func NewPoissonPacer(freq float64, seed uint64) *PoissonPacer {
	p := &PoissonPacer{freq: freq, seed: seed}
	p.reset()
	return p
}

func (p *PoissonPacer) reset() {
	p.rng = rand.New(rand.NewPCG(p.seed, 0x9e3779b97f4a7c15))
	p.hit, p.due = 0, 0
}

// Pace implements Pacer.
func (p *PoissonPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if p == nil || !(p.freq > 0) || math.IsInf(p.freq, 0) {
		return 0, true
	}
	if hits < p.hit {
		p.reset()
	}
	for p.hit < hits {
		gap := p.rng.ExpFloat64() / p.freq * float64(time.Second)
		p.due += time.Duration(gap)
		p.hit++
	}
	return p.due - elapsed, false
}

// Rate implements Pacer.
func (p *PoissonPacer) Rate(time.Duration) float64 {
	if p == nil {
		return 0
	}
	return p.freq
}
