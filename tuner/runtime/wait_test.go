package runtime

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batchtune/batchtune/tfserving"
)

// waitServer is a Server whose ports the test chose and whose end it says.
type waitServer struct {
	ep   Endpoints
	done chan struct{}
	exit Exit // set before done is closed
}

func newWaitServer(ep Endpoints) *waitServer {
	return &waitServer{ep: ep, done: make(chan struct{})}
}

func (s *waitServer) finish(e Exit) { s.exit = e; close(s.done) }

func (s *waitServer) Endpoints() Endpoints       { return s.ep }
func (s *waitServer) Done() <-chan struct{}      { return s.done }
func (s *waitServer) Exit() Exit                 { return s.exit }
func (s *waitServer) Stop(context.Context) error { return nil }

// denyingProxy serves what a transparent egress proxy answers for a
// destination it refuses: 403 text/plain, over HTTP/1.1 and h2c alike.
func denyingProxy(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("resolve_deny: denied destination"))
	})}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

type notFound struct {
	tfserving.UnimplementedModelServiceServer
}

func (notFound) GetModelStatus(context.Context, *tfserving.GetModelStatusRequest) (*tfserving.GetModelStatusResponse, error) {
	return nil, status.Error(codes.NotFound, "no model")
}

// tfLike serves gRPC that answers NOT_FOUND, as TF Serving does for no
// model, and returns its address.
func tfLike(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	tfserving.RegisterModelServiceServer(g, notFound{})
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// TestWaitPortsIgnoresAProxysAnswer: a 403 from a proxy on both ports is
// not the server answering; WaitPorts goes on until the server's end and
// reports it (seen in CI: a dead trial container's ports reached the
// sandbox's egress proxy).
func TestWaitPortsIgnoresAProxysAnswer(t *testing.T) {
	proxy := denyingProxy(t)
	if grpcAnswers(context.Background(), proxy) {
		t.Fatal("grpcAnswers: a plain-HTTP 403 counted as a gRPC server's answer")
	}
	s := newWaitServer(Endpoints{GRPC: proxy, REST: proxy})
	time.AfterFunc(300*time.Millisecond, func() { s.finish(Exit{Code: 1, Log: "rejected"}) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := WaitPorts(ctx, s)
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("WaitPorts with a proxy answering: got %v, want an *ExitError", err)
	}
}

// TestWaitPortsServerAnswers: a gRPC error status in gRPC's framing and any
// HTTP response are the server up.
func TestWaitPortsServerAnswers(t *testing.T) {
	g := tfLike(t)
	if !grpcAnswers(context.Background(), g) {
		t.Fatal("grpcAnswers: a gRPC NOT_FOUND did not count as an answer")
	}
	rest := denyingProxy(t) // any HTTP status is the REST port answering
	s := newWaitServer(Endpoints{GRPC: g, REST: rest})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WaitPorts(ctx, s); err != nil {
		t.Fatalf("WaitPorts: %v", err)
	}
}
