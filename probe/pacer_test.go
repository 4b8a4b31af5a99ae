package probe

import (
	"math"
	"testing"
	"time"
)

func TestConstantPacer(t *testing.T) {
	tests := []struct {
		name    string
		freq    float64
		elapsed time.Duration
		hits    uint64
		wait    time.Duration
		stop    bool
	}{
		// The first request is due at once.
		{"first", 100, 0, 0, 0, false},
		// Request 1 of 100/s is due at 10ms.
		{"second due later", 100, 0, 1, 10 * time.Millisecond, false},
		// Asked late, the wait is negative: the request is overdue by 5ms.
		{"overdue", 100, 15 * time.Millisecond, 1, -5 * time.Millisecond, false},
		// Request 1000 of 1000/s is due at exactly 1s.
		{"one second", 1000, 500 * time.Millisecond, 1000, 500 * time.Millisecond, false},
		// Fractional rates: request 1 of 0.5/s is due at 2s.
		{"slow rate", 0.5, 0, 1, 2 * time.Second, false},
		// Zero, negative, NaN and infinite rates stop instead of panicking.
		{"zero", 0, 0, 0, 0, true},
		{"negative", -1, 0, 0, 0, true},
		{"NaN", math.NaN(), 0, 0, 0, true},
		{"Inf", math.Inf(1), 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, stop := ConstantPacer{Freq: tt.freq}.Pace(tt.elapsed, tt.hits)
			if wait != tt.wait || stop != tt.stop {
				t.Errorf("Pace(%s, %d) = %s, %v; want %s, %v", tt.elapsed, tt.hits, wait, stop, tt.wait, tt.stop)
			}
		})
	}
}

func TestPoissonPacer(t *testing.T) {
	const rate, n = 1000.0, 200000
	p := NewPoissonPacer(rate, 7)
	var prev time.Duration
	var gaps []float64
	for i := uint64(0); i < n; i++ {
		w, stop := p.Pace(0, i)
		if stop {
			t.Fatal("stopped")
		}
		if w < prev {
			t.Fatalf("due times not increasing at hit %d: %s < %s", i, w, prev)
		}
		if i > 0 {
			gaps = append(gaps, (w - prev).Seconds())
		}
		prev = w
	}
	// The mean gap of an exponential is 1/rate, its coefficient of
	// variation 1; over 2e5 gaps both are within 1% with overwhelming odds.
	mean, _ := meanCI(gaps)
	var ss float64
	for _, g := range gaps {
		ss += (g - mean) * (g - mean)
	}
	cv := math.Sqrt(ss/float64(len(gaps)-1)) / mean
	if math.Abs(mean*rate-1) > 0.01 || math.Abs(cv-1) > 0.02 {
		t.Errorf("mean gap %.6fs (want %.6f), CV %.3f (want 1)", mean, 1/rate, cv)
	}
	// Same seed, same schedule; asking out of order replays it.
	q := NewPoissonPacer(rate, 7)
	w1, _ := q.Pace(0, 5000)
	w0, _ := q.Pace(0, 10)
	r := NewPoissonPacer(rate, 7)
	if v, _ := r.Pace(0, 10); v != w0 {
		t.Errorf("replayed hit 10 at %s, first time %s", w0, v)
	}
	if v, _ := r.Pace(0, 5000); v != w1 {
		t.Errorf("hit 5000 at %s and %s with the same seed", w1, v)
	}
	if v, _ := NewPoissonPacer(rate, 8).Pace(0, 5000); v == w1 {
		t.Errorf("different seeds gave the same schedule")
	}
	if _, stop := NewPoissonPacer(0, 1).Pace(0, 0); !stop {
		t.Error("rate 0 did not stop")
	}
}

func TestUpperHits(t *testing.T) {
	// 100/s for 10s: requests 0..999 are due before 10s.
	if got := upperHits(ConstantPacer{Freq: 100}, 10*time.Second); got != 1000 {
		t.Errorf("upperHits = %d, want 1000", got)
	}
}

func BenchmarkConstantPacer(b *testing.B) {
	p := ConstantPacer{Freq: 10000}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Pace(time.Duration(i)*100*time.Microsecond, uint64(i))
	}
}

func BenchmarkPoissonPacer(b *testing.B) {
	p := NewPoissonPacer(10000, 1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Pace(time.Duration(i)*100*time.Microsecond, uint64(i))
	}
}
