package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/device"
	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sched"
	"github.com/batchtune/batchtune/emulator/tensor"
	"github.com/batchtune/batchtune/emulator/warmup"
	"github.com/batchtune/batchtune/tfserving"
)

// Config is a stand-in server's configuration: tensorflow_model_server's
// flags, resolved. DefaultConfig gives TF's defaults; ParseArgs builds one
// from a command line.
type Config struct {
	// Port is the gRPC port; RESTAPIPort the REST port (0: no REST API).
	Port        int
	RESTAPIPort int
	// GRPCListener and RESTListener, when set, are used instead of
	// listening on the ports (tests listen on :0 themselves).
	GRPCListener, RESTListener net.Listener
	// GRPCSocketPath, if set, also serves gRPC on this UNIX socket.
	GRPCSocketPath string

	ModelName     string
	ModelBasePath string

	EnableBatching         bool
	BatchingParametersFile string

	// Session thread pools; 0 is TF's "auto": the number of cores.
	IntraOpParallelism, InterOpParallelism, SessionParallelism int

	MonitoringConfigFile string

	// MaxNumLoadRetries is how many times a failed load is retried,
	// LoadRetryInterval apart (TF: 5 and 60 s).
	MaxNumLoadRetries int
	LoadRetryInterval time.Duration

	// EnableModelWarmup replays <version>/assets.extra/
	// tf_serving_warmup_requests before the model is AVAILABLE, each
	// record WarmupIterations times.
	EnableModelWarmup bool
	WarmupIterations  int

	// GRPCMaxThreads and RESTAPINumThreads bound concurrently handled
	// requests (0: 4 × cores, as TF); RESTAPITimeout is a REST request's
	// deadline.
	GRPCMaxThreads    int
	RESTAPINumThreads int
	RESTAPITimeout    time.Duration

	// Cores is what "auto" means (0: runtime.NumCPU()).
	Cores int
	// Clock is the scheduler's and device's time (nil: the wall clock).
	Clock sched.Clock
	// Logger receives TF-style progress lines (nil: discarded).
	Logger *slog.Logger
}

// DefaultConfig returns tensorflow_model_server's defaults.
func DefaultConfig() Config {
	return Config{
		Port:              8500,
		ModelName:         "default",
		MaxNumLoadRetries: 5,
		LoadRetryInterval: time.Minute,
		WarmupIterations:  1,
		RESTAPITimeout:    30 * time.Second,
	}
}

func (c *Config) cores() int {
	if c.Cores > 0 {
		return c.Cores
	}
	return runtime.NumCPU()
}

// Server is a running stand-in: the model loaded, the ports open.
type Server struct {
	cfg      Config
	log      *slog.Logger
	sv       *servable
	metrics  *metrics
	grpc     *grpc.Server
	http     *http.Server
	grpcAddr net.Addr
	restAddr net.Addr

	done    chan struct{}
	errOnce sync.Once
	err     error
	wg      sync.WaitGroup
	stop    sync.Once
}

func configError(c codes.Code, format string, args ...any) error {
	return &StartError{Code: c, Msg: fmt.Sprintf(format, args...), Err: ErrConfig}
}

// Start loads the model (retrying failed loads as TF does), replays its
// warmup file if asked, and only then opens the gRPC and REST ports, as TF
// Serving opens them only once every model is AVAILABLE. It returns a
// *StartError when the server cannot start. The server runs until
// Shutdown or until ctx is cancelled.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Clock == nil {
		cfg.Clock = sched.Real()
	}
	if cfg.WarmupIterations <= 0 {
		cfg.WarmupIterations = 1
	}
	if cfg.ModelBasePath == "" {
		return nil, configError(codes.InvalidArgument, "Both server_options.model_base_path and server_options.model_config_file are empty!")
	}
	if cfg.GRPCListener == nil && cfg.Port == 0 {
		return nil, configError(codes.InvalidArgument, "server_options.grpc_port is not set.")
	}
	if cfg.SessionParallelism > 0 && (cfg.IntraOpParallelism > 0 || cfg.InterOpParallelism > 0) {
		return nil, configError(codes.InvalidArgument, "Either configure server_options.tensorflow_session_parallelism or (server_options.tensorflow_intra_op_parallelism, server_options.tensorflow_inter_op_parallelism). Both can not be set.")
	}
	if !cfg.EnableBatching && cfg.BatchingParametersFile != "" {
		return nil, configError(codes.InvalidArgument, "server_options.batching_parameters_file is set without setting server_options.enable_batching to true.")
	}
	var params *tfserving.BatchingParameters
	if cfg.EnableBatching {
		params = &tfserving.BatchingParameters{}
		if cfg.BatchingParametersFile == "" {
			params.ThreadPoolName = wrapperspb.String("model_server_batch_threads")
		} else {
			data, err := os.ReadFile(cfg.BatchingParametersFile)
			if err != nil {
				return nil, configError(codes.NotFound, "%s; No such file or directory", cfg.BatchingParametersFile)
			}
			p, err := configs.DecodeBatching(data)
			if err != nil {
				return nil, configError(codes.InvalidArgument, "Invalid protobuf file: '%s': %s", cfg.BatchingParametersFile, err)
			}
			params = p
		}
	}
	monitoring := &tfserving.MonitoringConfig{}
	if cfg.MonitoringConfigFile != "" {
		data, err := os.ReadFile(cfg.MonitoringConfigFile)
		if err != nil {
			return nil, configError(codes.NotFound, "%s; No such file or directory", cfg.MonitoringConfigFile)
		}
		if err := prototext.Unmarshal(data, monitoring); err != nil {
			return nil, configError(codes.InvalidArgument, "Invalid protobuf file: '%s': %s", cfg.MonitoringConfigFile, err)
		}
	}

	log.Info("Building single TensorFlow model file config", "model_name", cfg.ModelName, "model_base_path", cfg.ModelBasePath)
	m := newMetrics()
	sv, err := loadWithRetries(ctx, cfg, params, m, log)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, sv: sv, metrics: m, done: make(chan struct{})}
	if err := s.listen(monitoring); err != nil {
		sv.close()
		sv.rt.Close()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(sctx)
		case <-s.done:
		}
	}()
	return s, nil
}

func loadWithRetries(ctx context.Context, cfg Config, params *tfserving.BatchingParameters, m *metrics, log *slog.Logger) (*servable, error) {
	var last error
	for attempt := 0; attempt <= cfg.MaxNumLoadRetries; attempt++ {
		if attempt > 0 {
			log.Info("Retrying of servable load", "servable", cfg.ModelName, "attempt", attempt, "after", cfg.LoadRetryInterval)
			select {
			case <-ctx.Done():
				return nil, &StartError{Code: codes.Canceled, Msg: "load cancelled", Err: ErrLoad}
			case <-time.After(cfg.LoadRetryInterval):
			}
		}
		sv, err := load(ctx, cfg, params, m, log)
		if err == nil {
			return sv, nil
		}
		var se *StartError
		if errors.As(err, &se) && errors.Is(se.Err, ErrConfig) {
			return nil, err // not a load failure: TF does not retry these
		}
		log.Error("Loading servable failed", "servable", cfg.ModelName, "error", err)
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// load is one load attempt: read the model description, take the load
// time, apply the batching config's load-time rules, check device memory,
// build the device and schedulers, replay warmup.
func load(ctx context.Context, cfg Config, params *tfserving.BatchingParameters, m *metrics, log *slog.Logger) (*servable, error) {
	loadErr := func(c codes.Code, format string, args ...any) error {
		return &StartError{Code: c, Msg: fmt.Sprintf(format, args...), Err: ErrLoad}
	}
	md, err := model.Load(cfg.ModelBasePath)
	switch {
	case errors.Is(err, model.ErrBasePath):
		return nil, configError(codes.NotFound, "Could not find base path %s for servable %s", cfg.ModelBasePath, cfg.ModelName)
	case errors.Is(err, model.ErrNoVersions):
		return nil, configError(codes.NotFound, "No versions of servable %s found under base path %s", cfg.ModelName, cfg.ModelBasePath)
	case err != nil:
		return nil, loadErr(codes.InvalidArgument, "%s", trimModelPrefix(err))
	}
	log.Info("Loading servable", "name", cfg.ModelName, "version", md.Version, "dir", md.Dir)
	select {
	case <-ctx.Done():
		return nil, loadErr(codes.Canceled, "load cancelled")
	case <-time.After(md.Desc.LoadTime()):
	}

	cores := cfg.cores()
	intra, inter := cfg.IntraOpParallelism, cfg.InterOpParallelism
	if cfg.SessionParallelism > 0 {
		intra, inter = cfg.SessionParallelism, cfg.SessionParallelism
	}
	if intra <= 0 {
		intra = cores
	}
	if inter <= 0 {
		inter = cores
	}

	sv := &servable{name: cfg.ModelName, model: md, metrics: m, scheds: map[string]*sched.Scheduler{}}
	var opts sched.Options
	if params != nil {
		if err := configs.ValidateBatching(params); err != nil {
			return nil, loadErr(codes.InvalidArgument, "%s: %s", batchingSource(cfg), oneLine(err))
		}
		b := configs.Resolve(params, cores)
		sv.batching = &b
		opts = schedOptions(b)
	}
	d := md.Desc
	rt := device.NewRuntime(intra, inter, d.Host.Spin())
	switch d.Device {
	case model.Accelerator:
		sv.dev = device.NewAccelerator(*d.Accelerator, d.Host, d.Features(), d.Outputs(), rt, cfg.Clock, d.Seed)
	default:
		sv.dev = device.NewCPU(*d.CPU, d.Host, d.Features(), d.Outputs(), rt, d.Seed)
	}
	sv.rt = rt
	if sv.batching != nil {
		largest := opts.MaxBatchSize
		if opts.EnableLargeBatchSplitting {
			largest = opts.MaxExecutionBatchSize
		}
		if largest > sv.dev.MaxRows() {
			rt.Close()
			return nil, loadErr(codes.ResourceExhausted, "OOM when allocating tensor with shape[%d,%d] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc: max_batch_size %d does not fit the device memory of %s (largest batch that fits: %d)",
				largest, d.Features(), largest, md.Path, sv.dev.MaxRows())
		}
		for name := range d.Signatures {
			sc, err := sched.New(cfg.Clock, sv, opts)
			if err != nil {
				rt.Close()
				return nil, loadErr(codes.InvalidArgument, "%s: %v", batchingSource(cfg), err)
			}
			sv.scheds[name] = sc
		}
	}
	if cfg.EnableModelWarmup {
		if err := runWarmup(ctx, sv, cfg.WarmupIterations, log); err != nil {
			sv.close()
			rt.Close()
			return nil, err
		}
	}
	log.Info("Successfully loaded servable version", "name", cfg.ModelName, "version", md.Version)
	return sv, nil
}

func batchingSource(cfg Config) string {
	if cfg.BatchingParametersFile != "" {
		return cfg.BatchingParametersFile
	}
	return "batching parameters"
}

// schedOptions converts a resolved batching config to scheduler options.
func schedOptions(b configs.Batching) sched.Options {
	o := sched.Options{
		MaxBatchSize:              int(b.MaxBatchSize),
		BatchTimeout:              time.Duration(b.BatchTimeoutMicros) * time.Microsecond,
		NumBatchThreads:           int(b.NumBatchThreads),
		MaxEnqueuedBatches:        int(b.MaxEnqueuedBatches),
		EnableLargeBatchSplitting: b.EnableLargeBatchSplitting,
		MaxExecutionBatchSize:     int(b.MaxExecutionBatchSize),
	}
	for _, s := range b.AllowedBatchSizes {
		o.AllowedBatchSizes = append(o.AllowedBatchSizes, int(s))
	}
	return o
}

// SchedOptions is the scheduler configuration a batching config gives on a
// machine with cores cores: what the stand-in runs, for simulations that
// reuse its scheduler.
func SchedOptions(p *tfserving.BatchingParameters, cores int) sched.Options {
	return schedOptions(configs.Resolve(p, cores))
}

func trimModelPrefix(err error) string {
	msg := err.Error()
	for _, s := range []error{model.ErrInvalid, model.ErrNoDescription} {
		if errors.Is(err, s) {
			return strings.TrimPrefix(msg, s.Error()+": ")
		}
	}
	return msg
}

// oneLine joins a multi-line error (configs.Problems) into one line.
func oneLine(err error) string {
	var ps configs.Problems
	if errors.As(err, &ps) {
		parts := make([]string, len(ps))
		for i, p := range ps {
			parts[i] = p.String()
		}
		return strings.Join(parts, "; ")
	}
	return err.Error()
}

// runWarmup replays the version's warmup file through the serving path
// (batching included), each record iterations times, in file order.
func runWarmup(ctx context.Context, sv *servable, iterations int, log *slog.Logger) error {
	path := sv.model.WarmupFile()
	if path == "" {
		log.Info("No warmup data file found", "dir", sv.model.Dir)
		return nil
	}
	fail := func(format string, args ...any) error {
		return &StartError{Code: codes.InvalidArgument, Msg: fmt.Sprintf(format, args...), Err: ErrWarmup}
	}
	f, err := os.Open(path)
	if err != nil {
		return fail("Failed to open warmup file %s: %v", path, err)
	}
	defer f.Close()
	reqs, err := warmup.Read(f)
	if err != nil {
		return fail("%s: %v", path, err)
	}
	const maxRecords = 1000 // TF's kMaxNumRecords
	if len(reqs) > maxRecords {
		return fail("%s: Number of warmup records exceeds the maximum (%d) allowed: %d", path, maxRecords, len(reqs))
	}
	start := time.Now()
	for i, req := range reqs {
		inputs, err := decodeInputs(req.GetInputs())
		if err != nil {
			return fail("%s: record %d: %v", path, i, status.Convert(err).Message())
		}
		spec := &tfserving.ModelSpec{Name: sv.name, SignatureName: req.GetModelSpec().GetSignatureName()}
		for it := 0; it < iterations; it++ {
			if _, err := sv.predict(ctx, spec, inputs, req.GetOutputFilter()); err != nil {
				return fail("%s: record %d: %s", path, i, status.Convert(err).Message())
			}
		}
	}
	log.Info("Finished reading warmup data for model", "path", path, "records", len(reqs), "took", time.Since(start))
	return nil
}

// decodeInputs decodes a request's TensorProtos.
func decodeInputs(in map[string]*tfserving.TensorProto) (map[string]input, error) {
	out := make(map[string]input, len(in))
	for name, tp := range in {
		t, err := tensor.FromProto(tp)
		if err != nil {
			return nil, errStatus(codes.InvalidArgument, "input '%s': %s", name, strings.TrimPrefix(err.Error(), "tensor: "))
		}
		out[name] = input{dtype: tp.GetDtype(), t: t}
	}
	return out, nil
}

func (s *Server) listen(monitoring *tfserving.MonitoringConfig) error {
	listenErr := func(what string, err error) error {
		return &StartError{Code: codes.Unavailable, Msg: fmt.Sprintf("Failed to BuildAndStart %s: %v", what, err), Err: ErrConfig}
	}
	gl := s.cfg.GRPCListener
	if gl == nil {
		var err error
		gl, err = net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(s.cfg.Port)))
		if err != nil {
			return listenErr("gRPC server", err)
		}
	}
	cores := s.cfg.cores()
	grpcThreads := s.cfg.GRPCMaxThreads
	if grpcThreads <= 0 {
		grpcThreads = 4 * cores
	}
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(1<<31-1), grpc.MaxSendMsgSize(1<<31-1),
		grpc.ChainUnaryInterceptor(limitInterceptor(grpcThreads)),
	)
	tfserving.RegisterPredictionServiceServer(s.grpc, &predictionService{s: s})
	tfserving.RegisterModelServiceServer(s.grpc, &modelService{s: s})
	s.grpcAddr = gl.Addr()

	rl := s.cfg.RESTListener
	if rl == nil && s.cfg.RESTAPIPort != 0 {
		if s.cfg.RESTAPIPort == s.cfg.Port {
			s.log.Error("server_options.http_port cannot be same as grpc_port. Please use a different port for HTTP/REST API. Skipped exporting HTTP/REST API.")
		} else {
			var err error
			rl, err = net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(s.cfg.RESTAPIPort)))
			if err != nil {
				gl.Close()
				return listenErr("HTTP server", err)
			}
		}
	}
	listeners := []net.Listener{gl}
	if s.cfg.GRPCSocketPath != "" {
		_ = os.Remove(s.cfg.GRPCSocketPath)
		ul, err := net.Listen("unix", s.cfg.GRPCSocketPath)
		if err != nil {
			gl.Close()
			if rl != nil {
				rl.Close()
			}
			return listenErr("gRPC server on "+s.cfg.GRPCSocketPath, err)
		}
		listeners = append(listeners, ul)
	}
	for _, l := range listeners {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.grpc.Serve(l); err != nil {
				s.fail(err)
			}
		}()
	}
	s.log.Info("Running gRPC ModelServer at " + gl.Addr().String() + " ...")
	if rl != nil {
		restThreads := s.cfg.RESTAPINumThreads
		if restThreads <= 0 {
			restThreads = 4 * cores
		}
		s.http = &http.Server{Handler: s.restHandler(monitoring, restThreads), ReadHeaderTimeout: 30 * time.Second}
		s.restAddr = rl.Addr()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.http.Serve(rl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.fail(err)
			}
		}()
		s.log.Info("Exporting HTTP/REST API at:" + rl.Addr().String() + " ...")
	}
	return nil
}

// limitInterceptor bounds concurrently handled RPCs, as TF's gRPC server
// threads do: an RPC beyond the bound waits for a thread.
func limitInterceptor(n int) grpc.UnaryServerInterceptor {
	sem := make(chan struct{}, n)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		defer func() { <-sem }()
		return h(ctx, req)
	}
}

func (s *Server) fail(err error) {
	s.errOnce.Do(func() { s.err = err })
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
}

// GRPCAddr is the gRPC listener's address.
func (s *Server) GRPCAddr() net.Addr { return s.grpcAddr }

// RESTAddr is the REST listener's address (nil without a REST API).
func (s *Server) RESTAddr() net.Addr { return s.restAddr }

// Version is the model version being served.
func (s *Server) Version() int64 { return s.sv.model.Version }

// Shutdown stops accepting requests, lets queued batches finish (until ctx
// ends), then stops the device's thread pools. Safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() {
		if s.http != nil {
			_ = s.http.Shutdown(ctx)
		}
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			s.grpc.Stop()
		}
		s.sv.close()
		s.sv.waitIdle(ctx)
		s.wg.Wait()
		s.sv.rt.Close()
		close(s.done)
	})
	<-s.done
	return s.err
}

// Wait blocks until the server has stopped and returns why, nil after a
// Shutdown.
func (s *Server) Wait() error {
	<-s.done
	return s.err
}
