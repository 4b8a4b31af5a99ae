package probe

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The conformance suite of the gRPC senders: the lean client (GRPC) and
// grpc-go's (GRPCLib) must count the same things the same way against a
// real grpc-go server, whatever HTTP/2 does underneath.
func TestSenderConformance(t *testing.T) {
	for _, tr := range []Transport{GRPC, GRPCLib} {
		t.Run(string(tr), func(t *testing.T) {
			if tr == GRPCLib && testing.Short() {
				t.Skip("the fallback sender runs in the full suite")
			}
			t.Run("status codes", func(t *testing.T) { testStatusCodes(t, tr) })
			t.Run("large request", func(t *testing.T) { testLargeRequest(t, tr) })
			t.Run("large answer", func(t *testing.T) { testLargeAnswer(t, tr) })
			t.Run("stream limit", func(t *testing.T) { testStreamLimit(t, tr) })
			t.Run("deadline", func(t *testing.T) { testDeadline(t, tr) })
			t.Run("server restart", func(t *testing.T) { testServerRestart(t, tr) })
		})
	}
}

// Every third request fails with InvalidArgument (a trailers-only answer),
// and the server pings every 20 ms and drops a client that does not answer.
// The probe's counts must equal the server's decisions exactly.
func testStatusCodes(t *testing.T, tr Transport) {
	f := &fakeServer{err: func(n int64) error {
		if n%3 == 0 {
			return status.Error(codes.InvalidArgument, "bad input")
		}
		return nil
	}}
	addr := startFake(t, f, grpc.KeepaliveParams(keepalive.ServerParameters{Time: 20 * time.Millisecond, Timeout: 100 * time.Millisecond}))
	c := newTestClient(t, addr, &Options{Transport: tr})
	r, err := c.Measure(context.Background(), Load{Concurrency: 8}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	served := f.calls.Load()
	if r.Requests != served || r.Errors["InvalidArgument"] != served/3 || r.OK != served-served/3 || len(r.Errors) != 1 {
		t.Errorf("server served %d (every 3rd refused); probe: %d requests, %d ok, errors %v", served, r.Requests, r.OK, r.Errors)
	}
}

// A 6 MB request is far over HTTP/2's default 64 KiB windows: it must go
// out in pieces as the server grants window, and arrive intact.
func testLargeRequest(t *testing.T, tr Transport) {
	f := &fakeServer{}
	addr := startFake(t, f, grpc.MaxRecvMsgSize(64<<20))
	c := newTestClient(t, addr, &Options{Transport: tr, Inputs: []InputSpec{{Name: "image", DType: "float32", Shape: []int64{-1, 1536 * 1024}}}})
	r, err := c.Measure(context.Background(), Load{Concurrency: 2}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK < 2 || len(r.Errors) != 0 {
		t.Fatalf("ok %d errors %v", r.OK, r.Errors)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !proto.Equal(f.seen[0], c.Requests()[0]) {
		t.Error("the server received a different request")
	}
}

// A 4 MB answer must be read in full (windows granted) without stalling.
func testLargeAnswer(t *testing.T, tr Transport) {
	f := &fakeServer{outLen: 1 << 20}
	c := newTestClient(t, startFake(t, f), &Options{Transport: tr})
	r, err := c.Measure(context.Background(), Load{Concurrency: 4}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK < 4 || len(r.Errors) != 0 || r.OK != f.calls.Load() {
		t.Errorf("ok %d of %d served, errors %v", r.OK, f.calls.Load(), r.Errors)
	}
}

// A server that allows 2 concurrent streams per connection: 8 workers on
// one connection queue for streams instead of failing.
func testStreamLimit(t *testing.T, tr Transport) {
	f := &fakeServer{delay: func(int64, time.Time) time.Duration { return 2 * time.Millisecond }}
	c := newTestClient(t, startFake(t, f, grpc.MaxConcurrentStreams(2)), &Options{Transport: tr, Connections: 1})
	r, err := c.Measure(context.Background(), Load{Concurrency: 8}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK == 0 || len(r.Errors) != 0 || f.maxInflight.Load() > 2 {
		t.Errorf("ok %d errors %v, server saw %d at once (limit 2)", r.OK, r.Errors, f.maxInflight.Load())
	}
}

// A request over its deadline counts as DeadlineExceeded, and the server
// is told (its handler sees the cancellation) instead of working on.
func testDeadline(t *testing.T, tr Transport) {
	f := &fakeServer{delay: func(int64, time.Time) time.Duration { return 300 * time.Millisecond }}
	c := newTestClient(t, startFake(t, f), &Options{Transport: tr, RequestTimeout: 50 * time.Millisecond})
	r, err := c.Measure(context.Background(), Load{Concurrency: 2}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 0 || r.Errors["DeadlineExceeded"] < 10 {
		t.Errorf("ok %d errors %v", r.OK, r.Errors)
	}
	deadline := time.Now().Add(2 * time.Second)
	for f.cancelled.Load() < r.Errors["DeadlineExceeded"] && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.cancelled.Load(); got < r.Errors["DeadlineExceeded"] {
		t.Errorf("server saw %d cancellations of %d expired requests", got, r.Errors["DeadlineExceeded"])
	}
}

// The server stops gracefully (GOAWAY) in the middle of a run and a new
// one comes up on the same address: requests fail only while nothing
// listens, and the sender reconnects on its own.
func testServerRestart(t *testing.T, tr Transport) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	a, b := &fakeServer{}, &fakeServer{}
	_, stopA := serveFake(t, addr, a)
	c := newTestClient(t, addr, &Options{Transport: tr})
	time.AfterFunc(500*time.Millisecond, func() {
		stopA()
		time.Sleep(200 * time.Millisecond)
		serveFake(t, addr, b)
	})
	r, err := c.Measure(context.Background(), Load{Concurrency: 4}, fixed(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if a.calls.Load() == 0 || b.calls.Load() == 0 || r.OK != a.calls.Load()+b.calls.Load() {
		t.Errorf("served %d before and %d after the restart; probe counted %d ok (errors %v)", a.calls.Load(), b.calls.Load(), r.OK, r.Errors)
	}
	// While nothing listened (~200 ms), failed attempts are paced, not spun.
	if n := r.Errors["Unavailable"]; n > 200 {
		t.Errorf("%d Unavailable in ~200 ms down: the sender spins", n)
	}
}
