package configs

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/batchtune/batchtune/tfserving"
)

// Upper bounds on what a study may ask for. Each stops a typo or an
// attack from starting millions of goroutines, connections or threads
// before anything is measured; each is far above what a real study
// needs; the errors name the bound.
const (
	MaxConcurrency    = 10000     // load.concurrency, probe --concurrency, --max-workers
	MaxConnections    = 1024      // load.connections, probe --connections
	MaxRate           = 1_000_000 // load.rate, requests/s
	MaxWarmupRequests = 1_000_000 // load.warmup.requests
	MaxTrials         = 10000     // search.trials, schedule.trials, a run's budget
	MaxParallelism    = 64        // search.parallelism
	MaxTopK           = 100       // confirmation.top_k
	MaxRepeats        = 100       // confirmation.repeats
	MaxBatchRows      = 1 << 20   // probe --batch
	// MaxThreadsPerCore: a tuned thread count above this many times the
	// machine's cores draws a warning (ThreadWarnings).
	MaxThreadsPerCore = 4
)

// paramLimits are the largest values of the tuned parameters that are
// accepted at all, on any machine: a TF Serving asked for more would start
// that many threads, or queue that many batches, and fail or thrash.
var paramLimits = map[string]int64{
	"max_batch_size":                  1 << 20,
	"batch_timeout_micros":            60_000_000, // a minute
	"num_batch_threads":               4096,
	"max_enqueued_batches":            1 << 20,
	"max_execution_batch_size":        1 << 20,
	"tensorflow_intra_op_parallelism": 4096,
	"tensorflow_inter_op_parallelism": 4096,
	"grpc_max_threads":                4096,
	"rest_api_num_threads":            4096,
}

// threadParams are the parameters counted in threads, compared with the
// machine's cores by ThreadWarnings.
var threadParams = []string{"num_batch_threads", "tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism", "grpc_max_threads", "rest_api_num_threads"}

// checkLimits adds a problem for every value above its upper bound.
func (s *Study) checkLimits(ps *Problems) {
	atMost := func(field string, got, max int) {
		if got > max {
			ps.Add(field, "must be <= %d, got %d", max, got)
		}
	}
	l := s.Load
	atMost("load.concurrency", l.Concurrency, MaxConcurrency)
	atMost("load.connections", l.Connections, MaxConnections)
	if l.Rate > MaxRate {
		ps.Add("load.rate", "must be <= %d requests/s, got %v", MaxRate, l.Rate)
	}
	atMost("load.warmup.requests", l.Warmup.Requests, MaxWarmupRequests)
	atMost("search.trials", s.Search.Trials, MaxTrials)
	atMost("search.max_failures", s.Search.MaxFailures, MaxTrials)
	atMost("search.parallelism", s.Search.Parallelism, MaxParallelism)
	atMost("schedule.trials", s.Schedule.Trials, MaxTrials)
	atMost("confirmation.top_k", s.Confirmation.TopK, MaxTopK)
	atMost("confirmation.repeats", s.Confirmation.Repeats, MaxRepeats)
	for _, p := range s.Space {
		max, ok := paramLimits[p.Name]
		if !ok {
			continue
		}
		field := "space." + p.Name
		for j, v := range p.Values {
			if v > max {
				ps.Add(field+".values["+strconv.Itoa(j)+"]", "must be <= %d, got %d", max, v)
			}
		}
		if p.Max != nil && *p.Max > max {
			ps.Add(field+".max", "must be <= %d, got %d", max, *p.Max)
		}
		if p.Min != nil && *p.Min > max {
			ps.Add(field+".min", "must be <= %d, got %d", max, *p.Min)
		}
	}
}

// checkBatchingLimits adds a problem for every value of a batching.config
// above its upper bound.
func checkBatchingLimits(ps *Problems, p *tfserving.BatchingParameters) {
	for _, f := range []struct {
		name string
		v    interface{ GetValue() int64 }
		set  bool
	}{
		{"max_batch_size", p.GetMaxBatchSize(), p.GetMaxBatchSize() != nil},
		{"batch_timeout_micros", p.GetBatchTimeoutMicros(), p.GetBatchTimeoutMicros() != nil},
		{"num_batch_threads", p.GetNumBatchThreads(), p.GetNumBatchThreads() != nil},
		{"max_enqueued_batches", p.GetMaxEnqueuedBatches(), p.GetMaxEnqueuedBatches() != nil},
		{"max_execution_batch_size", p.GetMaxExecutionBatchSize(), p.GetMaxExecutionBatchSize() != nil},
	} {
		if f.set && f.v.GetValue() > paramLimits[f.name] {
			ps.Add(f.name, "must be <= %d, got %d", paramLimits[f.name], f.v.GetValue())
		}
	}
	for i, v := range p.GetAllowedBatchSizes() {
		if v > paramLimits["max_batch_size"] {
			ps.Add("allowed_batch_sizes["+strconv.Itoa(i)+"]", "must be <= %d, got %d", paramLimits["max_batch_size"], v)
		}
	}
}

// ThreadWarnings says which thread counts of the study's space exceed
// MaxThreadsPerCore times cores: allowed, but more threads than the
// machine can run mostly add contention.
func ThreadWarnings(s *Study, cores int) []string {
	if cores < 1 {
		return nil
	}
	limit := int64(MaxThreadsPerCore * cores)
	var out []string
	for _, p := range s.Space {
		if !slices.Contains(threadParams, p.Name) || p.UpToCores {
			continue // up_to_cores drops the values above the cores
		}
		top := int64(0)
		for _, v := range p.Values {
			top = max(top, v)
		}
		if p.Max != nil {
			top = max(top, *p.Max)
		}
		if top > limit {
			out = append(out, fmt.Sprintf("space.%s: values up to %d exceed %d× this machine's %d cores (%d); trials there mostly measure contention", p.Name, top, MaxThreadsPerCore, cores, limit))
		}
	}
	return out
}

// SLOTimeoutWarning says how many batch_timeout_micros values of the space
// the hard rule (batch_timeout_micros < SLO/3) will reject before they
// are tried; "" when none. Allowed, but such values only cost trials.
func SLOTimeoutWarning(s *Study) string {
	limit := s.SLO.Latency.D().Microseconds() / 3
	if limit <= 0 {
		return ""
	}
	for _, p := range s.Space {
		if p.Name != "batch_timeout_micros" {
			continue
		}
		if len(p.Values) > 0 {
			n := 0
			for _, v := range p.Values {
				if v >= limit {
					n++
				}
			}
			if n > 0 {
				return fmt.Sprintf("space.batch_timeout_micros: %d of its %d values are not below SLO/3 (%d µs for slo.latency %s) and will be rejected without a trial", n, len(p.Values), limit, s.SLO.Latency)
			}
			return ""
		}
		if p.Max != nil && *p.Max >= limit {
			return fmt.Sprintf("space.batch_timeout_micros: values from %d to max %d are not below SLO/3 (%d µs for slo.latency %s) and will be rejected without a trial", limit, *p.Max, limit, s.SLO.Latency)
		}
	}
	return ""
}
