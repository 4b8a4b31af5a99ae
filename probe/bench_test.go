package probe

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/batchtune/batchtune/tfserving"
)

// BenchmarkRecord is the recording hot path: a worker appends to its
// shard, the controller collects and aggregates (four histograms, the
// bucket, the SLO counter). One op is one request recorded.
func BenchmarkRecord(b *testing.B) {
	e := newEngine(context.Background(), nil, 1)
	s, _ := e.newShard()
	a := newAggregator(time.Second, true, 10*time.Millisecond, time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	var t int64
	for i := 0; i < b.N; i++ {
		t += 50_000 // 20k req/s
		s.add(record{intended: t, sent: t + 1000, done: t + 800_000 + int64(i%7)*10_000, code: codes.OK})
		if i%1024 == 1023 {
			e.collect(a)
			a.advance(t, int64(i), 0, 0)
		}
	}
	e.collect(a)
}

// noopSender answers at once: it isolates the engine's own cost.
type noopSender struct{}

func (noopSender) send(context.Context, int, int) codes.Code { return codes.OK }
func (noopSender) close() error                              { return nil }

func benchEngine(b *testing.B, start func(e *engine)) {
	e := newEngine(context.Background(), noopSender{}, 1)
	a := newAggregator(time.Second, true, 0, time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	start(e)
	for a.completed() < int64(b.N) {
		time.Sleep(time.Millisecond)
		e.collect(a)
	}
	e.stop()
	e.wg.Wait()
	b.StopTimer()
	e.collect(a)
}

// BenchmarkEngineClosedLoop: per-request cost of a closed-loop worker
// (timestamps, in-flight marker, record) around a sender that costs nothing.
func BenchmarkEngineClosedLoop(b *testing.B) {
	benchEngine(b, func(e *engine) { e.startClosed(2) })
}

// BenchmarkEngineOpenLoop: per-request cost of pacing plus the hand-off
// from dispatcher to worker, at a rate far above what it can do (so it
// measures the dispatcher's ceiling).
func BenchmarkEngineOpenLoop(b *testing.B) {
	benchEngine(b, func(e *engine) { e.startOpen(ConstantPacer{Freq: 1e8}, 8, 64) })
}

func benchSend(b *testing.B, tr Transport, typed bool) {
	addr := startFake(b, &fakeServer{})
	c := newTestClient(b, addr, &Options{Transport: tr, Connections: 1, Inputs: []InputSpec{{Name: "features", DType: "float32", Shape: []int64{-1, 256}}}})
	client := tfserving.NewPredictionServiceClient(c.ctrl)
	req := c.reqs[0]
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if typed {
			if _, err := client.Predict(ctx, req); err != nil {
				b.Fatal(err)
			}
		} else if code := c.snd.send(ctx, 0, 0); code != codes.OK {
			b.Fatal(code)
		}
	}
}

// BenchmarkSend* send one Predict with 256 floats at a time to an
// in-process fake (so every figure includes the fake server's own cost):
// Lean is probe's client (encoded once, answer dropped unread), Lib the
// same through grpc-go's client with the pass-through codec, Typed a plain
// generated client marshalling and unmarshalling per call.
func BenchmarkSendLean(b *testing.B)  { benchSend(b, GRPC, false) }
func BenchmarkSendLib(b *testing.B)   { benchSend(b, GRPCLib, false) }
func BenchmarkSendTyped(b *testing.B) { benchSend(b, GRPC, true) }
