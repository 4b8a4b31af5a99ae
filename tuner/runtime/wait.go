package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/batchtune/batchtune/tfserving"
)

// waitPoll is how often WaitPorts tries again; it bounds the resolution of
// a measured start-to-answer time.
const waitPoll = 20 * time.Millisecond

// WaitPorts waits until s answers on both ports: a gRPC call gets any answer
// from the server itself (even an error status), and an HTTP request to the
// REST port gets any response. A TCP connect alone is not enough, since a
// port proxy (docker-proxy) accepts connections before the server listens.
// It returns an *ExitError when s ends first and ctx's error when ctx ends
// first. Whether the model is AVAILABLE is the probe's question, not this.
func WaitPorts(ctx context.Context, s Server) error {
	ep := s.Endpoints()
	grpcUp, restUp := false, false
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		select {
		case <-s.Done():
			return &ExitError{Exit: s.Exit()}
		case <-ctx.Done():
			return fmt.Errorf("runtime: waiting for %s and %s to answer: %w", ep.GRPC, ep.REST, ctx.Err())
		default:
		}
		if !grpcUp {
			grpcUp = grpcAnswers(ctx, ep.GRPC)
		}
		if grpcUp && !restUp {
			restUp = restAnswers(ctx, client, ep.REST)
		}
		if grpcUp && restUp {
			// A server that answered and died at once is dead, not up.
			select {
			case <-s.Done():
				return &ExitError{Exit: s.Exit()}
			default:
				return nil
			}
		}
		select {
		case <-s.Done():
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// grpcAnswers reports whether a gRPC server answers at addr: a
// ModelService.GetModelStatus for no model gets a reply in gRPC's framing
// (TF answers INVALID_ARGUMENT or NOT_FOUND), not a transport failure. An
// answer in plain HTTP is not one: once a container's network is torn down,
// a connection to its address can leave by the default route and reach a
// transparent proxy, which answers 403 over h2c; grpc-go turns that status
// into PermissionDenied, but the reply carried no gRPC headers or trailers.
func grpcAnswers(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	var seen grpcFraming
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(&seen))
	if err != nil {
		return false
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = tfserving.NewModelServiceClient(conn).GetModelStatus(cctx, &tfserving.GetModelStatusRequest{
		ModelSpec: &tfserving.ModelSpec{Name: ""},
	})
	if err == nil {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	var se interface{ GRPCStatus() *status.Status }
	return errors.As(err, &se) && seen.Load()
}

// grpcFraming is a stats.Handler that notes whether a call's reply had
// gRPC's headers or trailers, which grpc-go reports only for a response
// whose content type is gRPC's.
type grpcFraming struct{ atomic.Bool }

func (g *grpcFraming) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (g *grpcFraming) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (g *grpcFraming) HandleConn(context.Context, stats.ConnStats) {}
func (g *grpcFraming) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.InHeader, *stats.InTrailer:
		g.Store(true)
	}
}

// restAnswers reports whether an HTTP server answers at addr with any status.
func restAnswers(ctx context.Context, client *http.Client, addr string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}
