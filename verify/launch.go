package verify

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Launch is the runtime Config that runs batching with flags, the server
// flags as export writes them: --enable_batching and
// --batching_parameters_file are dropped (the runtime sets them, pointing
// at its own copy), the parallelism flags become the Config's fields, and
// every other flag is passed on. Flags the runtime reserves (--port ...)
// are refused, naming the flag.
func Launch(batching []byte, flags []string) (runtime.Config, error) {
	var rc runtime.Config
	if _, err := configs.DecodeBatching(batching); err != nil {
		return rc, err
	}
	rc.Batching = batching
	for i, f := range flags {
		name, ok := runtime.FlagName(f)
		if !ok {
			return rc, fmt.Errorf("flags[%d]: %q: %w (want --name or --name=value)", i, f, runtime.ErrBadFlag)
		}
		_, val, _ := strings.Cut(f, "=")
		switch name {
		case "enable_batching", "batching_parameters_file":
			continue
		case search.IntraOpParallelism, search.InterOpParallelism:
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return rc, fmt.Errorf("flags[%d]: --%s: want a count >= 0, got %q", i, name, val)
			}
			if name == search.IntraOpParallelism {
				rc.IntraOpParallelism = n
			} else {
				rc.InterOpParallelism = n
			}
			continue
		}
		rc.Flags = append(rc.Flags, f)
	}
	return rc, rc.Validate()
}

// Params are the batching settings the causes are named with: the
// batching.config resolved against TF's defaults (num_batch_threads: the
// server's cores).
func Params(batching []byte, rc runtime.Config, cores int) ([]store.Param, error) {
	p, err := configs.DecodeBatching(batching)
	if err != nil {
		return nil, err
	}
	b := configs.Resolve(p, cores)
	return []store.Param{
		{Name: search.MaxBatchSize, Value: b.MaxBatchSize},
		{Name: search.BatchTimeoutMicros, Value: b.BatchTimeoutMicros},
		{Name: search.NumBatchThreads, Value: b.NumBatchThreads},
		{Name: search.MaxEnqueuedBatches, Value: b.MaxEnqueuedBatches},
		{Name: search.IntraOpParallelism, Value: int64(rc.IntraOpParallelism)},
		{Name: search.InterOpParallelism, Value: int64(rc.InterOpParallelism)},
	}, nil
}

// param returns the value of name in ps, or 0.
func param(ps []store.Param, name string) int64 {
	for _, p := range ps {
		if p.Name == name {
			return p.Value
		}
	}
	return 0
}
