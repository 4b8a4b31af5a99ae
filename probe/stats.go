package probe

import (
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"
)

// Histograms hold microseconds, from 1 µs to one hour, at 3 significant
// digits. Longer values are clamped to the top (and counted as such).
const histMaxUS = int64(time.Hour / time.Microsecond)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMaxUS, 3) }

func recordNS(h *hdrhistogram.Histogram, ns int64) {
	us := ns / 1000
	if us < 1 {
		us = 1
	} else if us > histMaxUS {
		us = histMaxUS
	}
	_ = h.RecordValue(us) // cannot fail inside the clamped range
}

func usToDur(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// Percentiles summarises one latency distribution.
type Percentiles struct {
	Count int64         `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P95   time.Duration `json:"p95_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p99_9_ns"`
	Max   time.Duration `json:"max_ns"`
}

// PercentilesOf summarises a histogram of latencies recorded in
// microseconds, as every figure the probe reports is; the zero value for
// an empty one. emulator/sim reports with it so that its figures are the
// probe's by construction.
func PercentilesOf(h *hdrhistogram.Histogram) Percentiles {
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	return Percentiles{
		Count: h.TotalCount(),
		Mean:  time.Duration(h.Mean() * float64(time.Microsecond)),
		P50:   usToDur(h.ValueAtQuantile(50)),
		P90:   usToDur(h.ValueAtQuantile(90)),
		P95:   usToDur(h.ValueAtQuantile(95)),
		P99:   usToDur(h.ValueAtQuantile(99)),
		P999:  usToDur(h.ValueAtQuantile(99.9)),
		Max:   usToDur(h.Max()),
	}
}

// Second is one bucket of the per-second time series. Requests are placed
// by the time they completed; Sent is counted by the dispatcher (open loop)
// at tick resolution.
type Second struct {
	T        int           `json:"t"` // seconds since the measurement began
	OK       int64         `json:"ok"`
	Errors   int64         `json:"errors"`
	Sent     int64         `json:"sent,omitempty"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	InFlight int           `json:"in_flight"`
	Workers  int           `json:"workers"`
}

// record is one request as a worker saw it, in nanoseconds since the run's
// epoch. In closed loop intended == sent.
type record struct {
	intended, sent, done int64
	code                 codes.Code
}

// codeUnfinished marks a request still in flight when the drain ended, and
// an open-loop request that was due but never sent because every worker was
// busy. Its done time is when it was given up; done-intended is a lower
// bound on its latency.
const codeUnfinished codes.Code = 100

// bucketAcc accumulates one bucket until it is finalised.
type bucketAcc struct {
	idx     int64
	ok, err int64
	hist    *hdrhistogram.Histogram
}

// aggregator owns every figure of a run. Only the run's controller
// goroutine touches it: workers hand it records through their shards, so
// there are no locks here and no per-request channel sends.
type aggregator struct {
	bucket int64 // bucket length, ns
	grace  int64 // how long after a bucket's end it is finalised
	open   bool  // open loop: record pacing lag
	sloNS  int64 // 0: no latency target

	latency, service, lag *hdrhistogram.Histogram

	byCode     [codes.Unauthenticated + 1]int64
	unfinished int64
	slow       int64 // completed or given-up requests over the SLO target
	stopAt     int64 // sending stopped; math.MaxInt64 before
	okInRun    int64 // OK completions at or before stopAt
	late       int64 // records that arrived after their bucket was final

	accs      []*bucketAcc // open buckets, in index order
	finalized int64        // buckets [0, finalized) are final
	spareHist []*hdrhistogram.Histogram
	series    []Second
	sentMarks []int64 // dispatched count at the first tick after each bucket boundary

	// stability windows, built from finalised buckets
	windowLen int64
	win       window
	winHist   *hdrhistogram.Histogram
	windows   []window
}

func newAggregator(bucket time.Duration, open bool, slo time.Duration, windowLen time.Duration) *aggregator {
	return &aggregator{
		bucket:    int64(bucket),
		grace:     int64(60 * time.Millisecond),
		open:      open,
		sloNS:     int64(slo),
		latency:   newHist(),
		service:   newHist(),
		lag:       newHist(),
		stopAt:    math.MaxInt64,
		windowLen: int64(windowLen),
		winHist:   newHist(),
		sentMarks: []int64{0},
	}
}

func (a *aggregator) acc(idx int64) *bucketAcc {
	if idx < a.finalized {
		return nil
	}
	for _, b := range a.accs {
		if b.idx == idx {
			return b
		}
	}
	var h *hdrhistogram.Histogram
	if n := len(a.spareHist); n > 0 {
		h, a.spareHist = a.spareHist[n-1], a.spareHist[:n-1]
	} else {
		h = newHist()
	}
	b := &bucketAcc{idx: idx, hist: h}
	// keep accs sorted; new buckets almost always go last
	i := len(a.accs)
	a.accs = append(a.accs, b)
	for i > 0 && a.accs[i-1].idx > idx {
		a.accs[i], a.accs[i-1] = a.accs[i-1], a.accs[i]
		i--
	}
	return b
}

func (a *aggregator) ingest(r record) {
	lat := r.done - r.intended
	if r.code == codeUnfinished {
		a.unfinished++
		recordNS(a.latency, lat)
		if a.sloNS > 0 && lat > a.sloNS {
			a.slow++
		}
		return
	}
	if int(r.code) < len(a.byCode) {
		a.byCode[r.code]++
	} else {
		a.byCode[codes.Unknown]++
	}
	b := a.acc(r.done / a.bucket)
	if b == nil {
		a.late++
		if i := r.done / a.bucket; i < int64(len(a.series)) {
			if r.code == codes.OK {
				a.series[i].OK++
			} else {
				a.series[i].Errors++
			}
		}
	}
	if r.code != codes.OK {
		if b != nil {
			b.err++
		}
		return
	}
	recordNS(a.latency, lat)
	recordNS(a.service, r.done-r.sent)
	if a.open {
		recordNS(a.lag, r.sent-r.intended)
	}
	if a.sloNS > 0 && lat > a.sloNS {
		a.slow++
	}
	if r.done <= a.stopAt {
		a.okInRun++
	}
	if b != nil {
		b.ok++
		recordNS(b.hist, lat)
	}
}

// advance finalises every bucket that ended more than grace before now,
// appends it to the series, and feeds the stability windows. It reports
// whether a window closed. sent is the dispatcher's running count and
// inFlight/workers the worker census at this tick.
func (a *aggregator) advance(now int64, sent int64, inFlight, workers int) (finalised, windowClosed bool) {
	for cur := now / a.bucket; int64(len(a.sentMarks)) <= cur; {
		a.sentMarks = append(a.sentMarks, sent)
	}
	for a.finalized*a.bucket+a.bucket+a.grace <= now {
		idx := a.finalized
		var b *bucketAcc
		if len(a.accs) > 0 && a.accs[0].idx == idx {
			b, a.accs = a.accs[0], a.accs[1:]
		}
		s := Second{T: int(idx * a.bucket / int64(time.Second)), InFlight: inFlight, Workers: workers}
		s.Sent = a.sentMarks[idx+1] - a.sentMarks[idx]
		if b != nil {
			s.OK, s.Errors = b.ok, b.err
			if b.hist.TotalCount() > 0 {
				s.P50 = usToDur(b.hist.ValueAtQuantile(50))
				s.P99 = usToDur(b.hist.ValueAtQuantile(99))
				s.Max = usToDur(b.hist.Max())
				a.winHist.Merge(b.hist)
			}
			b.hist.Reset()
			a.spareHist = append(a.spareHist, b.hist)
		}
		a.series = append(a.series, s)
		a.finalized++
		finalised = true
		if a.windowLen > 0 {
			if a.win.Dur == 0 {
				a.win.Start = time.Duration(idx * a.bucket)
			}
			a.win.Dur += time.Duration(a.bucket)
			a.win.OK += s.OK
			if int64(a.win.Dur) >= a.windowLen && a.win.OK >= minWindowSamples {
				a.win.P99 = usToDur(a.winHist.ValueAtQuantile(99))
				a.windows = append(a.windows, a.win)
				a.win = window{}
				a.winHist.Reset()
				windowClosed = true
			}
		}
	}
	return finalised, windowClosed
}

// flush finalises every open bucket (the run is over).
func (a *aggregator) flush(sent int64) {
	last := a.finalized
	for _, b := range a.accs {
		last = max(last, b.idx+1)
	}
	a.advance(last*a.bucket+a.grace, sent, 0, 0)
}

func (a *aggregator) completed() int64 {
	var n int64
	for _, c := range a.byCode {
		n += c
	}
	return n
}

func (a *aggregator) failed() int64 { return a.completed() - a.byCode[codes.OK] }

// lastP50s returns the median latencies of the finalised buckets that hold
// at least min successful requests.
func (a *aggregator) lastP50s(min int64) []time.Duration {
	var out []time.Duration
	for _, s := range a.series {
		if s.OK >= min {
			out = append(out, s.P50)
		}
	}
	return out
}
