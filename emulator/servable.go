package emulator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/device"
	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/sched"
	"github.com/batchtune/batchtune/emulator/tensor"
	"github.com/batchtune/batchtune/tfserving"
)

// servable is one loaded model version: its signatures, its device model
// and, with batching on, one batch scheduler per signature (TF keys its
// batch schedulers by tensor signature).
type servable struct {
	name     string
	model    *model.Model
	dev      device.Model
	rt       *device.Runtime
	batching *configs.Batching // nil: batching off
	scheds   map[string]*sched.Scheduler
	metrics  *metrics
}

// input is one decoded request input and the dtype it was sent as.
type input struct {
	dtype tfserving.DataType
	t     tensor.Tensor
}

// payload travels with a scheduler task: the request's feature rows in,
// its output rows out (written piece by piece by the batch executor).
type payload struct {
	x tensor.Tensor
	y []float32
}

// prediction is a Predict answer before encoding.
type prediction struct {
	signature string
	names     []string // output aliases in answer order
	outputs   map[string]tensor.Tensor
}

func errStatus(c codes.Code, format string, args ...any) error {
	return status.Error(c, fmt.Sprintf(format, args...))
}

// resolve checks a request's model spec against the loaded version and
// returns the signature it names.
func (s *servable) resolve(spec *tfserving.ModelSpec) (string, model.Signature, error) {
	if spec.GetName() != s.name {
		if v := spec.GetVersion(); v != nil {
			return "", model.Signature{}, errStatus(codes.NotFound, "Servable not found for request: Specific(%s, %d)", spec.GetName(), v.GetValue())
		}
		return "", model.Signature{}, errStatus(codes.NotFound, "Servable not found for request: Latest(%s)", spec.GetName())
	}
	if v := spec.GetVersion(); v != nil && v.GetValue() != s.model.Version {
		return "", model.Signature{}, errStatus(codes.NotFound, "Servable not found for request: Specific(%s, %d)", s.name, v.GetValue())
	}
	if l := spec.GetVersionLabel(); l != "" {
		return "", model.Signature{}, errStatus(codes.InvalidArgument, "Unrecognized servable version label: %s", l)
	}
	name := spec.GetSignatureName()
	if name == "" {
		name = model.DefaultSignature
	}
	sig, ok := s.model.Desc.Signatures[name]
	if !ok {
		return "", model.Signature{}, errStatus(codes.FailedPrecondition, "Serving signature key \"%s\" not found.", name)
	}
	return name, sig, nil
}

// responseSpec is the model spec an answer carries.
func (s *servable) responseSpec(signature string) *tfserving.ModelSpec {
	return &tfserving.ModelSpec{
		Name:          s.name,
		VersionChoice: &tfserving.ModelSpec_Version{Version: wrapperspb.Int64(s.model.Version)},
		SignatureName: signature,
	}
}

// predict checks the inputs against the signature the way TF does, runs
// the rows through the batch scheduler (or alone with batching off) and
// cuts the outputs. Errors are gRPC status errors with TF's codes and
// messages.
func (s *servable) predict(ctx context.Context, spec *tfserving.ModelSpec, inputs map[string]input, filter []string) (*prediction, error) {
	sigName, sig, err := s.resolve(spec)
	if err != nil {
		return nil, err
	}
	want := model.Names(sig.Inputs)
	if len(inputs) != len(sig.Inputs) {
		got := slices.Sorted(maps.Keys(inputs))
		var extra, missing []string
		for _, g := range got {
			if _, ok := sig.Inputs[g]; !ok {
				extra = append(extra, g)
			}
		}
		for _, w := range want {
			if _, ok := inputs[w]; !ok {
				missing = append(missing, w)
			}
		}
		return nil, errStatus(codes.InvalidArgument,
			"input size does not match signature: %d!=%d len({%s}) != len({%s}). Sent extra: {%s}. Missing but required: {%s}.",
			len(inputs), len(sig.Inputs), strings.Join(got, ","), strings.Join(want, ","), strings.Join(extra, ","), strings.Join(missing, ","))
	}
	rows := -1
	for i, name := range want {
		in, ok := inputs[name]
		if !ok {
			var sent []string
			for k := range inputs {
				if _, known := sig.Inputs[k]; !known {
					sent = append(sent, k)
				}
			}
			slices.Sort(sent)
			return nil, errStatus(codes.InvalidArgument, "input tensor alias not found in signature: %s. Inputs expected to be in the set {%s}.",
				strings.Join(sent, ","), strings.Join(want, ","))
		}
		ts := sig.Inputs[name]
		if in.dtype != ts.DataType() {
			return nil, errStatus(codes.InvalidArgument, "Expects arg[%d] to be %s but %s is provided", i,
				tensor.DTypeName(ts.DataType()), tensor.DTypeName(in.dtype))
		}
		if !shapeFits(in.t.Shape, ts.Shape) {
			return nil, errStatus(codes.InvalidArgument, "input '%s': shape %s is not compatible with the signature's %s",
				name, tensor.ShapeString(in.t.Shape), tensor.ShapeString(ts.Shape))
		}
		if rows >= 0 && in.t.Rows() != rows {
			return nil, errStatus(codes.InvalidArgument, "Batching Run() input tensors must have equal 0th-dimension size")
		}
		rows = in.t.Rows()
	}
	names, err := outputNames(sig, filter)
	if err != nil {
		return nil, err
	}
	if rows == 0 {
		return nil, errStatus(codes.InvalidArgument, "Batching Run() input tensors must have a non-empty 0th dimension")
	}

	// Request decoding proper: the inputs' rows side by side, in the
	// signature's input order, as the model's feature rows.
	x := concatFeatures(inputs, want, rows, sig.Features())
	y, err := s.execute(ctx, sigName, x)
	if err != nil {
		return nil, err
	}

	// Cut the model's output rows into the signature's outputs.
	all := model.Names(sig.Outputs)
	outs := make(map[string]tensor.Tensor, len(names))
	olen := sig.OutputLen()
	col := 0
	for _, name := range all {
		ts := sig.Outputs[name]
		w := ts.RowLen()
		if slices.Contains(names, name) {
			t := tensor.Tensor{Shape: append([]int64{int64(rows)}, ts.Shape[1:]...), Values: make([]float32, rows*w)}
			for r := 0; r < rows; r++ {
				copy(t.Values[r*w:(r+1)*w], y[r*olen+col:r*olen+col+w])
			}
			outs[name] = t
		}
		col += w
	}
	return &prediction{signature: sigName, names: names, outputs: outs}, nil
}

// shapeFits: same rank, and equal where the signature's dimension is known.
func shapeFits(got, want []int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if w >= 0 && got[i] != w {
			return false
		}
	}
	return true
}

// outputNames applies an output filter: TF's aliases and messages.
func outputNames(sig model.Signature, filter []string) ([]string, error) {
	all := model.Names(sig.Outputs)
	if len(filter) == 0 {
		return all, nil
	}
	seen := map[string]bool{}
	for _, f := range filter {
		if _, ok := sig.Outputs[f]; !ok {
			return nil, errStatus(codes.InvalidArgument, "output tensor alias not found in signature: %s Outputs expected to be in the set {%s}.", f, strings.Join(all, ","))
		}
		if seen[f] {
			return nil, errStatus(codes.InvalidArgument, "duplicate output tensor alias: %s", f)
		}
		seen[f] = true
	}
	return slices.Clone(filter), nil
}

func concatFeatures(inputs map[string]input, order []string, rows, features int) tensor.Tensor {
	x := tensor.Tensor{Shape: []int64{int64(rows), int64(features)}, Values: make([]float32, rows*features)}
	col := 0
	for _, name := range order {
		t := inputs[name].t
		w := t.RowLen()
		for r := 0; r < rows; r++ {
			copy(x.Values[r*features+col:r*features+col+w], t.Values[r*w:(r+1)*w])
		}
		col += w
	}
	return x
}

// execute runs feature rows through the model: as one task of the
// signature's batch scheduler, or alone when batching is off.
func (s *servable) execute(ctx context.Context, signature string, x tensor.Tensor) ([]float32, error) {
	rows := x.Rows()
	sc := s.scheds[signature]
	if sc == nil {
		if rows > s.dev.MaxRows() {
			return nil, oomStatus(rows, x.RowLen())
		}
		y, err := s.dev.Run(ctx, x)
		if err != nil {
			return nil, runStatus(err, rows, x.RowLen())
		}
		return y.Values, nil
	}
	s.metrics.inputBatch.Observe(float64(rows))
	p := &payload{x: x, y: make([]float32, rows*s.dev.Outputs())}
	done := make(chan error, 1)
	task := &sched.Task{Size: rows, Payload: p, Done: func(err error) { done <- err }}
	if d, ok := ctx.Deadline(); ok {
		task.Deadline = d
	}
	if err := sc.Submit(task); err != nil {
		return nil, schedStatus(err)
	}
	// Like TF's BatchingSession, wait for the batch even if the caller
	// has gone: the task is in a batch and will be executed.
	if err := <-done; err != nil {
		if errors.Is(err, sched.ErrExpired) {
			return nil, schedStatus(err)
		}
		return nil, err // the executor's errors are statuses already
	}
	return p.y, nil
}

// schedStatus maps scheduler errors to TF's statuses.
func schedStatus(err error) error {
	var se *sched.SizeError
	switch {
	case errors.As(err, &se):
		return errStatus(codes.InvalidArgument, "Task size %d is larger than maximum input batch size %d", se.Size, se.Max)
	case errors.Is(err, sched.ErrQueueFull):
		return errStatus(codes.Unavailable, "The batch scheduling queue to which this task was submitted is full")
	case errors.Is(err, sched.ErrExpired):
		return errStatus(codes.ResourceExhausted, "Run() timeout exceeded while waiting in batching queue")
	case errors.Is(err, sched.ErrClosed):
		return errStatus(codes.Unavailable, "Servable is unloading")
	case errors.Is(err, sched.ErrEmptyTask):
		return errStatus(codes.InvalidArgument, "Batching Run() input tensors must have a non-empty 0th dimension")
	}
	return errStatus(codes.Internal, "%v", err)
}

func oomStatus(rows, features int) error {
	return errStatus(codes.ResourceExhausted, "OOM when allocating tensor with shape[%d,%d] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc", rows, features)
}

func runStatus(err error, rows, features int) error {
	if errors.Is(err, device.ErrOOM) {
		return oomStatus(rows, features)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return errStatus(codes.Internal, "%v", err)
}

// Execute implements sched.Executor: the batch runs on its own goroutine,
// TF's batch thread.
func (s *servable) Execute(b *sched.Batch, done func(error)) {
	go func() { done(s.runBatch(b)) }()
}

var _ sched.Executor = (*servable)(nil)

// runBatch merges a batch's pieces into one tensor (padding with copies of
// the last task's first row, as TF does), records the batching metrics,
// runs the device and splits the outputs back into the tasks' buffers.
func (s *servable) runBatch(b *sched.Batch) error {
	f, o := s.dev.Features(), s.dev.Outputs()
	x := tensor.Tensor{Shape: []int64{int64(b.Padded), int64(f)}, Values: make([]float32, b.Padded*f)}
	row := 0
	for _, p := range b.Pieces {
		pl := p.Task.Payload.(*payload)
		copy(x.Values[row*f:], pl.x.Values[p.Offset*f:(p.Offset+p.Size)*f])
		row += p.Size
		if p.Offset == 0 {
			s.metrics.queuingLatency.WithLabelValues(s.batching.ThreadPoolName).Observe(micros(b.Started.Sub(p.Task.Enqueued())))
		}
	}
	if b.Padded > b.Size {
		last := b.Pieces[len(b.Pieces)-1]
		src := last.Task.Payload.(*payload).x.Values[last.Offset*f : (last.Offset+1)*f]
		for r := b.Size; r < b.Padded; r++ {
			copy(x.Values[r*f:(r+1)*f], src)
		}
	}
	s.metrics.processedBatch.Observe(float64(b.Padded))
	s.metrics.padding.WithLabelValues(strconv.Itoa(b.Padded)).Observe(float64(b.Padding()))

	y, err := s.dev.Run(context.Background(), x)
	if err != nil {
		return runStatus(err, b.Padded, f)
	}
	row = 0
	for _, p := range b.Pieces {
		pl := p.Task.Payload.(*payload)
		copy(pl.y[p.Offset*o:(p.Offset+p.Size)*o], y.Values[row*o:(row+p.Size)*o])
		row += p.Size
	}
	return nil
}

// signatureDefs is the model's signatures as TF's SignatureDefMap.
func (s *servable) signatureDefs() *tfserving.SignatureDefMap {
	m := &tfserving.SignatureDefMap{SignatureDef: map[string]*tfserving.SignatureDef{}}
	info := func(name string, t model.TensorSpec) *tfserving.TensorInfo {
		sp := &tfserving.TensorShapeProto{}
		for _, d := range t.Shape {
			sp.Dim = append(sp.Dim, &tfserving.TensorShapeProto_Dim{Size: d})
		}
		return &tfserving.TensorInfo{Encoding: &tfserving.TensorInfo_Name{Name: name + ":0"}, Dtype: t.DataType(), TensorShape: sp}
	}
	for name, sig := range s.model.Desc.Signatures {
		sd := &tfserving.SignatureDef{MethodName: sig.MethodName, Inputs: map[string]*tfserving.TensorInfo{}, Outputs: map[string]*tfserving.TensorInfo{}}
		for n, t := range sig.Inputs {
			sd.Inputs[n] = info(n, t)
		}
		for n, t := range sig.Outputs {
			sd.Outputs[n] = info(n, t)
		}
		m.SignatureDef[name] = sd
	}
	return m
}

// close stops the schedulers (queued batches still run) and, once the
// caller has drained requests, the thread pools.
func (s *servable) close() {
	for _, sc := range s.scheds {
		sc.Close()
	}
}

// idle reports whether no batch is queued or running.
func (s *servable) idle() bool {
	for _, sc := range s.scheds {
		if st := sc.Stats(); st.QueuedBatches > 0 || st.Running > 0 {
			return false
		}
	}
	return true
}

// waitIdle waits until idle or ctx is done.
func (s *servable) waitIdle(ctx context.Context) {
	for !s.idle() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}
