package configs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/tfserving"
)

// TF Serving's defaults for unset BatchingParameters fields
// (SharedBatchScheduler::QueueOptions and BatchingSession options).
const (
	DefaultMaxBatchSize          = 1000
	DefaultBatchTimeoutMicros    = 0
	DefaultMaxEnqueuedBatches    = 10
	DefaultThreadPoolName        = "batch_threads"
	DefaultMaxExecutionBatchSize = 1000
)

// Batching is a batching.config with every field resolved: set fields as
// given, unset fields at TF Serving's defaults. It is what a server actually
// runs with; the message form (*tfserving.BatchingParameters) is what a file
// says.
type Batching struct {
	MaxBatchSize              int64
	BatchTimeoutMicros        int64
	MaxEnqueuedBatches        int64
	NumBatchThreads           int64
	ThreadPoolName            string
	AllowedBatchSizes         []int64
	PadVariableLengthInputs   bool
	EnableLargeBatchSplitting bool
	MaxExecutionBatchSize     int64
}

// Resolve fills the unset fields of p with TF Serving's defaults.
// num_batch_threads defaults to the number of cores the server sees.
func Resolve(p *tfserving.BatchingParameters, cores int) Batching {
	b := Batching{
		MaxBatchSize:          DefaultMaxBatchSize,
		BatchTimeoutMicros:    DefaultBatchTimeoutMicros,
		MaxEnqueuedBatches:    DefaultMaxEnqueuedBatches,
		NumBatchThreads:       int64(cores),
		ThreadPoolName:        DefaultThreadPoolName,
		MaxExecutionBatchSize: DefaultMaxExecutionBatchSize,
	}
	if p == nil {
		return b
	}
	setInt := func(dst *int64, w *wrapperspb.Int64Value) {
		if w != nil {
			*dst = w.GetValue()
		}
	}
	setInt(&b.MaxBatchSize, p.GetMaxBatchSize())
	setInt(&b.BatchTimeoutMicros, p.GetBatchTimeoutMicros())
	setInt(&b.MaxEnqueuedBatches, p.GetMaxEnqueuedBatches())
	setInt(&b.NumBatchThreads, p.GetNumBatchThreads())
	setInt(&b.MaxExecutionBatchSize, p.GetMaxExecutionBatchSize())
	if w := p.GetThreadPoolName(); w != nil {
		b.ThreadPoolName = w.GetValue()
	}
	if w := p.GetEnableLargeBatchSplitting(); w != nil {
		b.EnableLargeBatchSplitting = w.GetValue()
	}
	b.AllowedBatchSizes = append([]int64(nil), p.GetAllowedBatchSizes()...)
	b.PadVariableLengthInputs = p.GetPadVariableLengthInputs()
	return b
}

// Params returns b as a message with every tuned field set explicitly, so
// that the written file does not depend on the server's defaults.
func (b Batching) Params() *tfserving.BatchingParameters {
	p := &tfserving.BatchingParameters{
		MaxBatchSize:            wrapperspb.Int64(b.MaxBatchSize),
		BatchTimeoutMicros:      wrapperspb.Int64(b.BatchTimeoutMicros),
		MaxEnqueuedBatches:      wrapperspb.Int64(b.MaxEnqueuedBatches),
		NumBatchThreads:         wrapperspb.Int64(b.NumBatchThreads),
		AllowedBatchSizes:       append([]int64(nil), b.AllowedBatchSizes...),
		PadVariableLengthInputs: b.PadVariableLengthInputs,
	}
	if b.ThreadPoolName != "" && b.ThreadPoolName != DefaultThreadPoolName {
		p.ThreadPoolName = wrapperspb.String(b.ThreadPoolName)
	}
	if b.EnableLargeBatchSplitting {
		p.EnableLargeBatchSplitting = wrapperspb.Bool(true)
		p.MaxExecutionBatchSize = wrapperspb.Int64(b.MaxExecutionBatchSize)
	}
	return p
}

// DecodeBatching parses a batching.config in protobuf text format. It checks
// syntax and field names only; ValidateBatching checks the values. JSON is
// refused with ErrJSONBatchingConfig, as TF Serving refuses it.
func DecodeBatching(data []byte) (*tfserving.BatchingParameters, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return nil, ErrJSONBatchingConfig
	}
	p := &tfserving.BatchingParameters{}
	if err := prototext.Unmarshal(data, p); err != nil {
		// prototext errors read "proto: (line 2:3): unknown field: foo";
		// drop the library prefix, keep the position.
		msg := strings.TrimPrefix(err.Error(), "proto:")
		return nil, fmt.Errorf("batching.config: %s", strings.TrimSpace(msg))
	}
	return p, nil
}

// LoadBatching reads, decodes and validates the batching.config at path.
// Every error names the file.
func LoadBatching(path string) (*tfserving.BatchingParameters, error) {
	data, err := ReadFile(path, MaxBatchingBytes)
	if err != nil {
		return nil, fmt.Errorf("configs: %w", err)
	}
	p, err := DecodeBatching(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := ValidateBatching(p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ValidateBatching applies TF Serving's load-time rules to p and returns every
// violation together as Problems (nil when p is valid). Unset fields are not
// checked: TF's defaults are valid.
func ValidateBatching(p *tfserving.BatchingParameters) error {
	var ps Problems
	positive := func(field string, w *wrapperspb.Int64Value) {
		if w != nil && w.GetValue() <= 0 {
			ps.Add(field, "must be positive, got %d", w.GetValue())
		}
	}
	positive("max_batch_size", p.GetMaxBatchSize())
	positive("max_enqueued_batches", p.GetMaxEnqueuedBatches())
	positive("num_batch_threads", p.GetNumBatchThreads())
	positive("max_execution_batch_size", p.GetMaxExecutionBatchSize())
	if w := p.GetBatchTimeoutMicros(); w != nil && w.GetValue() < 0 {
		ps.Add("batch_timeout_micros", "must not be negative, got %d", w.GetValue())
	}
	checkBatchingLimits(&ps, p)
	if w := p.GetThreadPoolName(); w != nil && w.GetValue() == "" {
		ps.Add("thread_pool_name", "must not be empty when set")
	}

	maxBatch := int64(DefaultMaxBatchSize)
	if w := p.GetMaxBatchSize(); w != nil {
		maxBatch = w.GetValue()
	}
	splitting := p.GetEnableLargeBatchSplitting().GetValue()
	if w := p.GetMaxExecutionBatchSize(); w != nil && splitting && w.GetValue() > maxBatch {
		ps.Add("max_execution_batch_size", "must not exceed max_batch_size (%d), got %d", maxBatch, w.GetValue())
	}
	sizes := p.GetAllowedBatchSizes()
	for i, s := range sizes {
		field := "allowed_batch_sizes[" + strconv.Itoa(i) + "]"
		if s <= 0 {
			ps.Add(field, "must be positive, got %d", s)
		}
		if i > 0 && s <= sizes[i-1] {
			ps.Add(field, "entries must increase, got %d after %d", s, sizes[i-1])
		}
	}
	if n := len(sizes); n > 0 {
		// With splitting, batches are cut to max_execution_batch_size, and
		// TF requires the last allowed size to match that instead.
		limit, limitName := maxBatch, "max_batch_size"
		if splitting {
			limit, limitName = DefaultMaxExecutionBatchSize, "max_execution_batch_size"
			if w := p.GetMaxExecutionBatchSize(); w != nil {
				limit = w.GetValue()
			}
		}
		if sizes[n-1] != limit {
			ps.Add("allowed_batch_sizes["+strconv.Itoa(n-1)+"]", "last entry must equal %s (%d), got %d", limitName, limit, sizes[n-1])
		}
	}
	return ps.Err()
}

// EncodeBatching writes p in TF Serving's text format, one field per line in
// field-number order, wrappers as "name { value: N }". Unlike prototext's
// output, which is deliberately unstable, the bytes depend only on p, so
// exported files diff cleanly and golden tests can pin them.
func EncodeBatching(p *tfserving.BatchingParameters) []byte {
	var b bytes.Buffer
	wrapped := func(name string, w *wrapperspb.Int64Value) {
		if w != nil {
			fmt.Fprintf(&b, "%s { value: %d }\n", name, w.GetValue())
		}
	}
	wrapped("max_batch_size", p.GetMaxBatchSize())
	wrapped("batch_timeout_micros", p.GetBatchTimeoutMicros())
	wrapped("max_enqueued_batches", p.GetMaxEnqueuedBatches())
	wrapped("num_batch_threads", p.GetNumBatchThreads())
	if w := p.GetThreadPoolName(); w != nil {
		fmt.Fprintf(&b, "thread_pool_name { value: %s }\n", strconv.Quote(w.GetValue()))
	}
	for _, s := range p.GetAllowedBatchSizes() {
		fmt.Fprintf(&b, "allowed_batch_sizes: %d\n", s)
	}
	if p.GetPadVariableLengthInputs() {
		b.WriteString("pad_variable_length_inputs: true\n")
	}
	if w := p.GetEnableLargeBatchSplitting(); w != nil {
		fmt.Fprintf(&b, "enable_large_batch_splitting { value: %t }\n", w.GetValue())
	}
	wrapped("max_execution_batch_size", p.GetMaxExecutionBatchSize())
	return b.Bytes()
}
