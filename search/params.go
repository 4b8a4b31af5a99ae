package search

import (
	"slices"
	"strings"
)

// Parameter names, as TF Serving spells them: batching.config fields and
// tensorflow_model_server flags.
const (
	MaxBatchSize       = "max_batch_size"
	BatchTimeoutMicros = "batch_timeout_micros"
	NumBatchThreads    = "num_batch_threads"
	MaxEnqueuedBatches = "max_enqueued_batches"
	IntraOpParallelism = "tensorflow_intra_op_parallelism"
	InterOpParallelism = "tensorflow_inter_op_parallelism"
	AllowedBatchSizes  = "allowed_batch_sizes"
	GRPCMaxThreads     = "grpc_max_threads"
	RESTAPINumThreads  = "rest_api_num_threads"
)

// Choices of the derived parameter allowed_batch_sizes. A configuration
// holds the choice's code (its index in AllowedChoices); the list written to
// batching.config is derived from the configuration's max_batch_size, so it
// always ends at max_batch_size as TF requires.
const (
	AllowedNone     int64 = iota // unset: batches run at the size they reach
	AllowedPow2                  // powers of two below max_batch_size, then max_batch_size
	AllowedQuarters              // max/4, max/2, 3max/4, max (rounded up, deduplicated)
	AllowedMax                   // max_batch_size only: every batch padded to full
)

// AllowedChoices are the names of the allowed_batch_sizes choices, indexed by
// code.
var AllowedChoices = []string{"none", "pow2", "quarters", "max"}

// AllowedSizes derives the allowed_batch_sizes list for choice code from
// maxBatch. It returns nil for AllowedNone, for an unknown code, and for a
// maxBatch below 1.
func AllowedSizes(code, maxBatch int64) []int64 {
	if maxBatch < 1 {
		return nil
	}
	switch code {
	case AllowedPow2:
		var out []int64
		for p := int64(1); p < maxBatch; p *= 2 {
			out = append(out, p)
		}
		return append(out, maxBatch)
	case AllowedQuarters:
		var out []int64
		for q := int64(1); q <= 4; q++ {
			v := (maxBatch*q + 3) / 4
			if len(out) == 0 || v > out[len(out)-1] {
				out = append(out, v)
			}
		}
		return out
	case AllowedMax:
		return []int64{maxBatch}
	}
	return nil
}

// paramKind says where a parameter goes when a configuration is run.
type paramKind int

const (
	batchingField paramKind = iota // a BatchingParameters field
	serverFlag                     // a tensorflow_model_server flag
	derivedChoice                  // a named choice derived into batching.config
)

// paramInfo is what search knows about one TF Serving parameter.
type paramInfo struct {
	name string
	kind paramKind
	// min is the smallest value TF accepts (0 means "auto" for the
	// parallelism flags).
	min int64
	// tfDefault is TF Serving's value when the parameter is not set.
	tfDefault func(r Rules) int64
	// recipe is the seeds' starting recipe (DESIGN.md §1).
	recipe func(r Rules) int64
}

func constant(v int64) func(Rules) int64 { return func(Rules) int64 { return v } }

// known lists the parameters a space may declare, in their canonical order.
var known = []paramInfo{
	{MaxBatchSize, batchingField, 1, constant(1000), constant(8)},
	{BatchTimeoutMicros, batchingField, 0, constant(0), constant(20000)},
	{NumBatchThreads, batchingField, 1,
		func(r Rules) int64 { return int64(max(r.Cores, 1)) },
		func(r Rules) int64 { return int64(max(r.GPUs, 1)) }},
	{MaxEnqueuedBatches, batchingField, 1, constant(10), constant(32)},
	{IntraOpParallelism, serverFlag, 0, constant(0),
		// Half the physical cores for a small model.
		func(r Rules) int64 { return int64(max(r.Cores/2, 1)) }},
	{InterOpParallelism, serverFlag, 0, constant(0), constant(2)},
	{AllowedBatchSizes, derivedChoice, 0, constant(AllowedNone), constant(AllowedNone)},
	// TF Serving's default for both is 4 × the schedulable CPUs.
	{GRPCMaxThreads, serverFlag, 1,
		func(r Rules) int64 { return 4 * int64(max(r.Cores, 1)) },
		func(r Rules) int64 { return 4 * int64(max(r.Cores, 1)) }},
	{RESTAPINumThreads, serverFlag, 1,
		func(r Rules) int64 { return 4 * int64(max(r.Cores, 1)) },
		func(r Rules) int64 { return 4 * int64(max(r.Cores, 1)) }},
}

// autoIsCores reports whether 0 means "auto" for the parameter, which TF
// resolves to one thread per core: the intra- and inter-op parallelism
// flags.
func (p paramInfo) autoIsCores() bool {
	return p.name == IntraOpParallelism || p.name == InterOpParallelism
}

func lookupParam(name string) (paramInfo, bool) {
	i := slices.IndexFunc(known, func(p paramInfo) bool { return p.name == name })
	if i < 0 {
		return paramInfo{}, false
	}
	return known[i], true
}

func knownNames() string {
	names := make([]string, len(known))
	for i, p := range known {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}
