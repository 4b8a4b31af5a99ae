package configs

import (
	"errors"

	"github.com/batchtune/batchtune/internal/problem"
)

// ErrJSONBatchingConfig is returned when a batching.config holds JSON: TF
// Serving reads only protobuf text format and refuses to start on JSON.
var ErrJSONBatchingConfig = errors.New("configs: batching config is JSON; TF Serving reads protobuf text format only (e.g. max_batch_size { value: 32 })")

// Problem is one invalid value, named by its field path
// (space.max_batch_size.values[2], allowed_batch_sizes[3]).
type Problem = problem.Problem

// Problems is every problem found in one document, reported together. A nil
// or empty Problems is not an error: use Err to turn a collection into one.
// Add records one; Err returns the collection as an error, or nil.
type Problems = problem.List
