package probe

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/batchtune/batchtune/tfserving"
)

// fakeServer is a minimal TF Serving for tests: Predict answers after
// delay(n) (n counts requests from 1) with error err(n) when set;
// GetModelStatus answers status(); GetModelMetadata one signature.
type fakeServer struct {
	tfserving.UnimplementedPredictionServiceServer
	tfserving.UnimplementedModelServiceServer

	delay  func(n int64, now time.Time) time.Duration
	err    func(n int64) error
	outLen int // floats in the answer; 1 when 0
	status func() (*tfserving.GetModelStatusResponse, error)
	inputs map[string]*tfserving.TensorInfo

	calls       atomic.Int64
	inflight    atomic.Int64
	maxInflight atomic.Int64
	cancelled   atomic.Int64 // requests whose context ended before the answer
	mu          sync.Mutex
	seen        []*tfserving.PredictRequest // first few requests, for inspection
}

func (f *fakeServer) Predict(ctx context.Context, req *tfserving.PredictRequest) (*tfserving.PredictResponse, error) {
	n := f.calls.Add(1)
	in := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for m := f.maxInflight.Load(); in > m && !f.maxInflight.CompareAndSwap(m, in); m = f.maxInflight.Load() {
	}
	if n <= 4 {
		f.mu.Lock()
		f.seen = append(f.seen, req)
		f.mu.Unlock()
	}
	if f.delay != nil {
		if d := f.delay(n, time.Now()); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				f.cancelled.Add(1)
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}
	}
	if f.err != nil {
		if err := f.err(n); err != nil {
			return nil, err
		}
	}
	out := make([]float32, max(f.outLen, 1))
	return &tfserving.PredictResponse{Outputs: map[string]*tfserving.TensorProto{
		"y": {Dtype: tfserving.DataType_DT_FLOAT, FloatVal: out},
	}}, nil
}

func (f *fakeServer) GetModelStatus(context.Context, *tfserving.GetModelStatusRequest) (*tfserving.GetModelStatusResponse, error) {
	if f.status != nil {
		return f.status()
	}
	return &tfserving.GetModelStatusResponse{ModelVersionStatus: []*tfserving.ModelVersionStatus{
		{Version: 1, State: tfserving.ModelVersionStatus_AVAILABLE, Status: &tfserving.StatusProto{}},
	}}, nil
}

func (f *fakeServer) GetModelMetadata(_ context.Context, req *tfserving.GetModelMetadataRequest) (*tfserving.GetModelMetadataResponse, error) {
	if req.GetModelSpec().GetName() != "m" {
		return nil, status.Errorf(codes.NotFound, "Could not find any versions of model %s", req.GetModelSpec().GetName())
	}
	inputs := f.inputs
	if inputs == nil {
		inputs = map[string]*tfserving.TensorInfo{"x": {Dtype: tfserving.DataType_DT_FLOAT,
			TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: -1}, {Size: 4}}}}}
	}
	defs, err := anypb.New(&tfserving.SignatureDefMap{SignatureDef: map[string]*tfserving.SignatureDef{
		"serving_default": {Inputs: inputs, MethodName: "tensorflow/serving/predict"},
	}})
	if err != nil {
		return nil, err
	}
	return &tfserving.GetModelMetadataResponse{ModelSpec: req.GetModelSpec(), Metadata: map[string]*anypb.Any{"signature_def": defs}}, nil
}

// startFake serves f on 127.0.0.1:0 until the test ends and returns its
// address.
func startFake(t testing.TB, f *fakeServer, opts ...grpc.ServerOption) string {
	t.Helper()
	addr, _ := serveFake(t, "127.0.0.1:0", f, opts...)
	return addr
}

func startFakeAt(t testing.TB, addr string, f *fakeServer, opts ...grpc.ServerOption) string {
	serveFake(t, addr, f, opts...)
	return addr
}

// serveFake serves f at addr (":0" picks a port) until the test ends and
// returns the address and a function that stops the server gracefully
// (GOAWAY, then close once the requests in flight are answered).
func serveFake(t testing.TB, addr string, f *fakeServer, opts ...grpc.ServerOption) (string, func()) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Error(err)
		return "", func() {}
	}
	s := grpc.NewServer(opts...)
	tfserving.RegisterPredictionServiceServer(s, f)
	tfserving.RegisterModelServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop) // at once, even with requests hung in the fake
	return lis.Addr().String(), s.GracefulStop
}

// newTestClient connects to a fake at addr with a small generated payload.
func newTestClient(t testing.TB, addr string, o *Options) *Client {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	if len(o.Inputs) == 0 && len(o.Requests) == 0 {
		o.Inputs = []InputSpec{{Name: "x", DType: "float32", Shape: []int64{-1, 4}}}
	}
	c, err := New(context.Background(), Target{Addr: addr, Model: "m"}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
