package probe

import (
	"fmt"
	"math"

	"github.com/batchtune/batchtune/configs"
)

// Load is the fixed load of a run: closed loop (Concurrency > 0) or open
// loop (Rate > 0), never both.
type Load struct {
	// Concurrency is the number of requests kept in flight (closed loop).
	Concurrency int `json:"concurrency,omitempty"`
	// Rate is the offered rate in requests per second (open loop). Each
	// request's latency counts from its intended send time.
	Rate float64 `json:"rate,omitempty"`
	// Poisson spaces open-loop requests as a Poisson process (seeded by
	// Seed) instead of evenly.
	Poisson bool   `json:"poisson,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	// MaxWorkers bounds the open-loop requests in flight, DefaultMaxWorkers
	// when 0. Workers are added only when a request falls due and none is
	// idle.
	MaxWorkers int `json:"max_workers,omitempty"`
}

// DefaultMaxWorkers bounds open-loop concurrency unless Load says otherwise.
const DefaultMaxWorkers = 4096

// Open reports whether l is an open-loop load.
func (l Load) Open() bool { return l.Rate > 0 }

func (l Load) String() string {
	if l.Open() {
		s := fmt.Sprintf("open loop %g req/s", l.Rate)
		if l.Poisson {
			s += " (Poisson)"
		}
		return s
	}
	return fmt.Sprintf("closed loop, concurrency %d", l.Concurrency)
}

func (l Load) problems(ps *configs.Problems) {
	switch {
	case l.Concurrency > 0 && l.Rate > 0:
		ps.Add("load", "give concurrency (closed loop) or rate (open loop), not both")
	case l.Concurrency < 0:
		ps.Add("load.concurrency", "must be >= 1, got %d", l.Concurrency)
	case l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		ps.Add("load.rate", "must be a positive number of requests per second, got %g", l.Rate)
	case l.Concurrency == 0 && l.Rate == 0:
		ps.Add("load", "give concurrency (closed loop) or rate (open loop)")
	}
	if l.MaxWorkers < 0 {
		ps.Add("load.max_workers", "must be >= 1, got %d", l.MaxWorkers)
	}
}

func (l Load) pacer() Pacer {
	if l.Poisson {
		return NewPoissonPacer(l.Rate, l.Seed)
	}
	return ConstantPacer{Freq: l.Rate}
}
