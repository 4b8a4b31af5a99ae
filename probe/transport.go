package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/batchtune/batchtune/tfserving"
)

// Transport names how requests reach the server.
type Transport string

// Transports.
const (
	// GRPC sends PredictionService/Predict with probe's lean gRPC client
	// (see h2.go): the default.
	GRPC Transport = "grpc"
	// GRPCLib sends it through the grpc-go library's client instead: about
	// twice the client CPU per request, for comparison, or for a server the
	// lean client does not get along with.
	GRPCLib Transport = "grpc-lib"
	// REST posts to /v1/models/NAME:predict with a JSON body.
	REST Transport = "rest"
)

const predictMethod = "/tensorflow.serving.PredictionService/Predict"

// Flow-control windows of the load connections: 4 MiB per stream, 64 MiB
// per connection, so that image-sized answers never wait on a window.
const (
	streamWindow = 4 << 20
	connWindow   = 64 << 20
)

// sender sends one prepared request and returns its outcome as a gRPC code.
// worker picks the connection, req the prepared request. Implementations
// must be safe for concurrent use and must not allocate more than their
// protocol library does.
type sender interface {
	send(ctx context.Context, worker, req int) codes.Code
	close() error
}

// rawCodec lets the hot path skip protobuf entirely: requests are encoded
// once (Client keeps their bytes in a mem.BufferSlice) and responses are
// dropped unread, since a load generator needs only the status. It keeps
// the codec name "proto" so the content-type on the wire is unchanged.
type rawCodec struct{}

// discard is the response sink of rawCodec.
type discard struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*mem.BufferSlice); ok {
		// The buffers are SliceBuffers, whose Ref and Free do nothing, so
		// gRPC may "free" them after writing and they stay valid for reuse.
		return *b, nil
	}
	return nil, fmt.Errorf("probe: rawCodec cannot marshal %T", v)
}

func (rawCodec) Unmarshal(_ mem.BufferSlice, v any) error {
	if _, ok := v.(*discard); ok {
		return nil
	}
	return fmt.Errorf("probe: rawCodec cannot unmarshal into %T", v)
}

func (rawCodec) Name() string { return "proto" }

// grpcSender sends pre-encoded Predict requests over a fixed set of
// connections; worker w uses connection w mod len(conns).
type grpcSender struct {
	conns []*grpc.ClientConn
	reqs  []mem.BufferSlice
	opts  []grpc.CallOption
}

var _ sender = (*grpcSender)(nil)

func newGRPCSender(addr string, n int, maxMsg int, reqs []*tfserving.PredictRequest) (*grpcSender, error) {
	g := &grpcSender{opts: []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}}
	for _, r := range reqs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("%w: encode request: %w", ErrBadPayload, err)
		}
		g.reqs = append(g.reqs, mem.BufferSlice{mem.SliceBuffer(b)})
	}
	for i := 0; i < n; i++ {
		// Separate ClientConns are separate HTTP/2 connections: one
		// connection serialises its frames through one writer, which caps a
		// single connection's throughput.
		conn, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
			// Reconnect within ~0.2 s of a server coming back, not after
			// gRPC's default backoff of up to 2 minutes.
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoffConfig, MinConnectTimeout: 2 * time.Second}),
			// Fixed, large flow-control windows: setting them turns off
			// gRPC's bandwidth-delay estimator (a PING per burst of data
			// received) and makes WINDOW_UPDATE frames rare. On loopback or
			// a LAN the estimator has nothing to learn; its frames are pure
			// per-request cost.
			grpc.WithInitialWindowSize(streamWindow),
			grpc.WithInitialConnWindowSize(connWindow),
			// No transparent retries: a request the server never saw would be
			// replayed silently and its latency would include the replay, and
			// the retry bookkeeping keeps a reference to every sent message.
			grpc.WithDisableRetry(),
		)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("%w: %s: %w", ErrBadOptions, addr, err)
		}
		conn.Connect()
		g.conns = append(g.conns, conn)
	}
	return g, nil
}

func (g *grpcSender) send(ctx context.Context, worker, req int) codes.Code {
	conn := g.conns[worker%len(g.conns)]
	err := conn.Invoke(ctx, predictMethod, &g.reqs[req], &discard{}, g.opts...)
	if err == nil {
		return codes.OK
	}
	code := status.Code(err)
	if code == codes.Unavailable {
		// With no connection, gRPC fails calls at once; wait a little for
		// the state to change instead of spinning. (An UNAVAILABLE the
		// server sent, such as a full batch queue, arrives on a Ready
		// connection and is not slowed.)
		if st := conn.GetState(); st != connectivity.Ready {
			wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			conn.WaitForStateChange(wctx, st)
			cancel()
		}
	}
	return code
}

func (g *grpcSender) close() error {
	var errs []error
	for _, c := range g.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// restSender posts pre-encoded JSON bodies to :predict. HTTP/1.1 carries
// one request per connection at a time, so it keeps one idle keep-alive
// connection per worker.
type restSender struct {
	client *http.Client
	url    string
	bodies [][]byte
}

var _ sender = (*restSender)(nil)

func newRESTSender(t Target, workers int, reqs []*tfserving.PredictRequest) (*restSender, error) {
	r := &restSender{
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConns:        workers,
			MaxIdleConnsPerHost: workers,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}},
		url: "http://" + t.RESTAddr + t.restModelPath() + ":predict",
	}
	for i, req := range reqs {
		b, err := restBody(req, t)
		if err != nil {
			return nil, fmt.Errorf("%w: request %d as JSON: %w", ErrBadPayload, i, err)
		}
		r.bodies = append(r.bodies, b)
	}
	return r, nil
}

func (r *restSender) send(ctx context.Context, _, req int) codes.Code {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.bodies[req]))
	if err != nil {
		return codes.Internal
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return codes.Canceled
		}
		return codes.Unavailable
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return httpCode(resp.StatusCode)
}

func (r *restSender) close() error {
	r.client.CloseIdleConnections()
	return nil
}

// httpCode maps a TF Serving REST status to the gRPC code the same failure
// has on the gRPC API, so errors are counted alike on both transports.
func httpCode(s int) codes.Code {
	switch {
	case s >= 200 && s < 300:
		return codes.OK
	case s == http.StatusBadRequest:
		return codes.InvalidArgument
	case s == http.StatusNotFound:
		return codes.NotFound
	case s == http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case s == http.StatusServiceUnavailable:
		return codes.Unavailable
	case s == http.StatusGatewayTimeout, s == http.StatusRequestTimeout:
		return codes.DeadlineExceeded
	case s == http.StatusUnauthorized:
		return codes.Unauthenticated
	case s == http.StatusForbidden:
		return codes.PermissionDenied
	case s == http.StatusConflict:
		return codes.Aborted
	case s == http.StatusNotImplemented:
		return codes.Unimplemented
	case s >= 500:
		return codes.Internal
	}
	return codes.Unknown
}

// restBody renders req in TF Serving's columnar REST form:
// {"signature_name": S, "inputs": {"x": [[...], ...]}}.
func restBody(req *tfserving.PredictRequest, t Target) ([]byte, error) {
	inputs := map[string]any{}
	for name, tensor := range req.GetInputs() {
		vals, err := tensorValues(tensor)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		inputs[name] = nest(vals, shapeOf(tensor))
	}
	body := map[string]any{"inputs": inputs}
	if sig := req.GetModelSpec().GetSignatureName(); sig != "" {
		body["signature_name"] = sig
	} else if t.Signature != "" {
		body["signature_name"] = t.Signature
	}
	return json.Marshal(body)
}

func defaultHTTPClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second}
}

// dialControl opens a connection for the occasional typed call (status,
// metadata, the check request). It reconnects fast after a refusal, so that
// a server that opens its port late is seen within ~0.2 s.
func dialControl(addr string) (*grpc.ClientConn, error) {
	if err := checkHostPort("addr", addr); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoffConfig, MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(DefaultMaxMessageSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: addr %q: %w", ErrBadOptions, addr, err)
	}
	return conn, nil
}
