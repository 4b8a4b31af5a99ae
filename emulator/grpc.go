package emulator

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/batchtune/batchtune/tfserving"
)

// predictionService is tensorflow.serving.PredictionService.
type predictionService struct {
	tfserving.UnimplementedPredictionServiceServer
	s *Server
}

var _ tfserving.PredictionServiceServer = (*predictionService)(nil)

// Predict decodes the request's tensors, predicts, and records TF's
// request_count and request_latency.
func (p *predictionService) Predict(ctx context.Context, req *tfserving.PredictRequest) (*tfserving.PredictResponse, error) {
	start := time.Now()
	resp, err := p.predict(ctx, req)
	p.s.record(req.GetModelSpec().GetName(), "GRPC", start, err)
	return resp, err
}

func (p *predictionService) predict(ctx context.Context, req *tfserving.PredictRequest) (*tfserving.PredictResponse, error) {
	if req.GetModelSpec() == nil {
		return nil, status.Error(codes.InvalidArgument, "Missing ModelSpec")
	}
	inputs, err := decodeInputs(req.GetInputs())
	if err != nil {
		return nil, err
	}
	pred, err := p.s.sv.predict(ctx, req.GetModelSpec(), inputs, req.GetOutputFilter())
	if err != nil {
		return nil, err
	}
	resp := &tfserving.PredictResponse{ModelSpec: p.s.sv.responseSpec(pred.signature), Outputs: map[string]*tfserving.TensorProto{}}
	for _, name := range pred.names {
		resp.Outputs[name] = pred.outputs[name].Proto()
	}
	return resp, nil
}

// GetModelMetadata answers metadata_field "signature_def" with the model's
// SignatureDefMap.
func (p *predictionService) GetModelMetadata(ctx context.Context, req *tfserving.GetModelMetadataRequest) (*tfserving.GetModelMetadataResponse, error) {
	return p.s.metadata(req.GetModelSpec(), req.GetMetadataField())
}

func (s *Server) metadata(spec *tfserving.ModelSpec, fields []string) (*tfserving.GetModelMetadataResponse, error) {
	if spec == nil {
		return nil, status.Error(codes.InvalidArgument, "Missing model_spec")
	}
	if len(fields) == 0 {
		return nil, status.Error(codes.InvalidArgument, "GetModelMetadataRequest must specify at least one metadata_field")
	}
	for _, f := range fields {
		if f != "signature_def" {
			return nil, status.Errorf(codes.InvalidArgument, "Metadata field %s is not supported", f)
		}
	}
	probe := &tfserving.ModelSpec{Name: spec.GetName(), VersionChoice: spec.GetVersionChoice()}
	if _, _, err := s.sv.resolve(probe); err != nil {
		return nil, err
	}
	sigs, err := anypb.New(s.sv.signatureDefs())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	spec = s.sv.responseSpec("")
	return &tfserving.GetModelMetadataResponse{ModelSpec: spec, Metadata: map[string]*anypb.Any{"signature_def": sigs}}, nil
}

// modelService is tensorflow.serving.ModelService.
type modelService struct {
	tfserving.UnimplementedModelServiceServer
	s *Server
}

var _ tfserving.ModelServiceServer = (*modelService)(nil)

// GetModelStatus reports the loaded version AVAILABLE. (Ports open only
// after loading, so no other state is ever observable.)
func (m *modelService) GetModelStatus(ctx context.Context, req *tfserving.GetModelStatusRequest) (*tfserving.GetModelStatusResponse, error) {
	return m.s.modelStatus(req.GetModelSpec())
}

func (s *Server) modelStatus(spec *tfserving.ModelSpec) (*tfserving.GetModelStatusResponse, error) {
	if spec == nil {
		return nil, status.Error(codes.InvalidArgument, "Missing ModelSpec")
	}
	if spec.GetName() != s.sv.name {
		return nil, status.Errorf(codes.NotFound, "Could not find any versions of model %s", spec.GetName())
	}
	if v := spec.GetVersion(); v != nil && v.GetValue() != s.sv.model.Version {
		return nil, status.Errorf(codes.NotFound, "Could not find version %d of model %s", v.GetValue(), spec.GetName())
	}
	return &tfserving.GetModelStatusResponse{ModelVersionStatus: []*tfserving.ModelVersionStatus{{
		Version: s.sv.model.Version,
		State:   tfserving.ModelVersionStatus_AVAILABLE,
		Status:  &tfserving.StatusProto{},
	}}}, nil
}

// record counts a Predict in TF's request_count{model_name,status} and
// request_latency{model_name,API,entrypoint} (µs).
func (s *Server) record(modelName, entrypoint string, start time.Time, err error) {
	s.metrics.requestCount.WithLabelValues(modelName, CodeName(status.Code(err))).Inc()
	s.metrics.requestLatency.WithLabelValues(modelName, "Predict", entrypoint).Observe(micros(time.Since(start)))
}
