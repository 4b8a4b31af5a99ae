package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/tfserving"
)

// probeFake is the smallest TF Serving the command can talk to: model "m"
// with one input x of shape [-1, 4].
type probeFake struct {
	tfserving.UnimplementedPredictionServiceServer
	tfserving.UnimplementedModelServiceServer
}

func (probeFake) Predict(context.Context, *tfserving.PredictRequest) (*tfserving.PredictResponse, error) {
	return &tfserving.PredictResponse{Outputs: map[string]*tfserving.TensorProto{"y": {Dtype: tfserving.DataType_DT_FLOAT, FloatVal: []float32{1}}}}, nil
}

func (probeFake) GetModelStatus(context.Context, *tfserving.GetModelStatusRequest) (*tfserving.GetModelStatusResponse, error) {
	return &tfserving.GetModelStatusResponse{ModelVersionStatus: []*tfserving.ModelVersionStatus{{Version: 1, State: tfserving.ModelVersionStatus_AVAILABLE}}}, nil
}

func (probeFake) GetModelMetadata(context.Context, *tfserving.GetModelMetadataRequest) (*tfserving.GetModelMetadataResponse, error) {
	defs, _ := anypb.New(&tfserving.SignatureDefMap{SignatureDef: map[string]*tfserving.SignatureDef{"serving_default": {
		Inputs: map[string]*tfserving.TensorInfo{"x": {Dtype: tfserving.DataType_DT_FLOAT,
			TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: -1}, {Size: 4}}}}},
	}}})
	return &tfserving.GetModelMetadataResponse{Metadata: map[string]*anypb.Any{"signature_def": defs}}, nil
}

func startProbeFake(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	tfserving.RegisterPredictionServiceServer(s, probeFake{})
	tfserving.RegisterModelServiceServer(s, probeFake{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// runProbeCmd runs `batchtune probe args...` in its own app and returns
// stdout, stderr and the error the command returned.
func runProbeCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	app := &cli.App{Name: "batchtune", Commands: []*cli.Command{probeCommand()}, Writer: &out, ErrWriter: &errw}
	err := app.RunContext(context.Background(), append([]string{"batchtune", "probe"}, args...))
	return out.String(), errw.String(), err
}

func TestProbeCommandFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // every fragment must be in the error
	}{
		// Nothing given: both required flags named.
		{"nothing", nil, []string{"--target HOST:PORT is required", "--model NAME is required"}},
		// Both loop kinds, a bad dtype and a malformed input, all at once.
		{"several", []string{"--target", "h:1", "--model", "m", "--concurrency", "2", "--rate", "5", "--input", "x:flaot:-1,4", "--input", "y"},
			[]string{"not both", `--input "x:flaot:-1,4": unknown dtype "flaot"`, `--input "y": want NAME:DTYPE:SHAPE`}},
		// A shape that is not made of integers.
		{"bad shape", []string{"--target", "h:1", "--model", "m", "--input", "x:float:-1,four"}, []string{`shape: "four" is not an integer`}},
		// Two payload sources.
		{"two payloads", []string{"--target", "h:1", "--model", "m", "--input", "x:float:-1", "--request-file", "r.json"}, []string{"one payload source"}},
		// A payload file that does not exist is named.
		{"missing file", []string{"--target", "h:1", "--model", "m", "--warmup-file", "/nonexistent/warmup"}, []string{"--warmup-file", "/nonexistent/warmup"}},
		// REST needs its address; Poisson needs a rate.
		{"rest without address", []string{"--target", "h:1", "--model", "m", "--transport", "rest", "--poisson"}, []string{"--transport rest needs --rest", "--poisson needs --rate"}},
		// Non-positive load.
		{"zero load", []string{"--target", "h:1", "--model", "m", "--rate", "0"}, []string{"--rate must be > 0"}},
		// Stray arguments.
		{"argument", []string{"--target", "h:1", "--model", "m", "extra"}, []string{`unexpected argument "extra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runProbeCmd(t, tt.args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestProbeCommandUnreachable(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := lis.Addr().String()
	lis.Close()
	_, _, err := runProbeCmd(t, "--target", addr, "--model", "m", "--ready-timeout", "300ms")
	if err == nil || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want unreachable: connection refused naming %s", err, addr)
	}
}

func TestProbeCommandRuns(t *testing.T) {
	addr := startProbeFake(t)
	out, _, err := runProbeCmd(t, "--target", addr, "--model", "m", "--concurrency", "2", "--input", "x:float32:-1,4", "--batch", "3",
		"--warmup-requests", "20", "--min-duration", "1s", "--max-duration", "1s", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r probe.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output does not decode: %v\n%s", err, out)
	}
	if r.OK == 0 || r.Load.Concurrency != 2 || r.StopReason != probe.StopMaxDuration {
		t.Errorf("result %+v", r)
	}
	// Text mode, payload discovered from the signature, with the series.
	out, _, err = runProbeCmd(t, "--target", addr, "--model", "m", "--rate", "200", "--no-warmup", "--min-duration", "1s", "--max-duration", "2s", "--series")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"open loop 200 req/s", "throughput", "latency", "service", "generator", "   t      ok"} {
		if !strings.Contains(out, w) {
			t.Errorf("summary lacks %q:\n%s", w, out)
		}
	}
}
