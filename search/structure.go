package search

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// What TF Serving's batching is known to do before any trial runs, used by
// the Bayesian strategy as starting points and as model inputs, never as
// constraints (a starting point that turns out bad is just one trial; an
// input that does not matter gets a long lengthscale):
//
//   - A batch cannot hold more rows than are in the server: at most the
//     closed-loop rows in flight, and at most grpc_max_threads requests,
//     since each in-flight RPC holds one gRPC thread (DESIGN.md §2).
//   - A batch closes when it is full or its timeout expires; with k batch
//     threads and N rows in the server, batches of about N/k rows keep
//     every thread busy, so a max_batch_size of N/k with a timeout long
//     enough to fill it is the throughput-shaped split.
//   - TF Serving turns a request away (UNAVAILABLE) when its batching
//     queue is full: the k batches being run and the max_enqueued_batches
//     queued hold at most (queue + k) × max_batch_size rows (held), so a
//     closed-loop load with more rows in the server than that is turned
//     away in part.

// PinnedFlags reads the integer values of the tuned server flags a study
// pins in target.flags ("--name=value" or "--name value"): the facts
// Rules.Fixed carries. Unknown and non-integer flags are left out.
func PinnedFlags(args []string) map[string]int64 {
	out := map[string]int64{}
	for i, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		info, ok := lookupParam(name)
		if !ok || info.kind != serverFlag {
			continue
		}
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			out[name] = n
		}
	}
	return out
}

// grpcThreads is the grpc_max_threads a configuration runs with: its own
// value, else the study's pinned flag, else TF Serving's default.
func (s *Space) grpcThreads(val func(string) (int64, bool)) int64 {
	if v, ok := val(GRPCMaxThreads); ok && v > 0 {
		return v
	}
	if v, ok := s.rules.Fixed[GRPCMaxThreads]; ok && v > 0 {
		return v
	}
	info, _ := lookupParam(GRPCMaxThreads)
	return info.tfDefault(s.rules)
}

// inServer is the most rows a batch of this configuration can hold: the
// closed-loop rows in flight, capped by grpc_max_threads (with an open-loop
// load only the latter is known).
func (s *Space) inServer(val func(string) (int64, bool)) int64 {
	g := s.grpcThreads(val)
	if s.rules.InFlight > 0 {
		return min(int64(s.rules.InFlight), g)
	}
	return g
}

// structural appends the derived model inputs of a configuration, each
// scaled to [0, 1] on a log scale: the rows a batch can actually hold
// (max_batch_size capped by the rows in the server) and the rows each
// batch thread gets when the server's rows are shared among them. They
// let the model see that max_batch_size 256 and 2048 behave alike when
// only 64 requests are in flight, which the raw parameters cannot say.
func (s *Space) structural(x []float64, val func(string) (int64, bool)) []float64 {
	if !s.hasStructure() {
		return x
	}
	mbs, _ := val(MaxBatchSize)
	cap := s.inServer(val)
	threads := int64(1)
	if v, ok := val(NumBatchThreads); ok && v > 0 {
		threads = v
	} else if !s.has(NumBatchThreads) {
		threads = s.fixedValue(mustParam(NumBatchThreads))
	}
	top := math.Log(float64(max(s.maxInServer(), 2)))
	eff := float64(min(mbs, cap))
	share := math.Max(1, math.Min(float64(mbs), float64(cap)/float64(max(threads, 1))))
	return append(x, math.Log(math.Max(eff, 1))/top, math.Log(share)/top)
}

// held is how many rows the batches being run and queued can hold: with
// threads batch threads and queue max_enqueued_batches of max_batch_size
// mbs, (queue + threads) × mbs. A request beyond them is turned away.
func held(queue, threads, mbs int64) int64 { return (queue + threads) * mbs }

// queueFor is the shortest max_enqueued_batches whose batches hold rows
// (held(queue, threads, mbs) >= rows).
func queueFor(rows, threads, mbs int64) int64 { return ceilDiv(rows, mbs) - threads }

// holdInput is the derived model input of Bayes.QueueInput: the share of
// the closed-loop rows in the server (inServer) that the configuration's
// batches can hold (held), capped at 1, on the log scale of structural's
// inputs (1 - log(rows/held)/log(top), floored at 0). A configuration that
// holds every row reads 1. ok is false where it does not apply: no
// max_batch_size, or no closed-loop load (an open-loop load's rows in the
// server are not known before a trial).
func (s *Space) holdInput(val func(string) (int64, bool)) (float64, bool) {
	if !s.hasStructure() || s.rules.InFlight <= 0 {
		return 0, false
	}
	setting := func(name string) int64 {
		if v, ok := val(name); ok && v > 0 {
			return v
		}
		return s.fixedValue(mustParam(name))
	}
	mbs, _ := val(MaxBatchSize)
	rows := s.inServer(val)
	h := held(setting(MaxEnqueuedBatches), max(setting(NumBatchThreads), 1), max(mbs, 1))
	if h >= rows {
		return 1, true
	}
	top := math.Log(float64(max(s.maxInServer(), 2)))
	return math.Max(0, 1-math.Log(float64(rows)/float64(h))/top), true
}

// hasStructure reports whether the derived inputs apply: the space tunes
// max_batch_size and something caps the rows in the server.
func (s *Space) hasStructure() bool { return s.has(MaxBatchSize) }

func (s *Space) has(name string) bool { _, ok := s.byName[name]; return ok }

// maxInServer is the largest in-server row count over the space.
func (s *Space) maxInServer() int64 {
	g := s.grpcThreads(func(string) (int64, bool) { return 0, false })
	if i, ok := s.byName[GRPCMaxThreads]; ok {
		g = slices.Max(s.params[i].Values)
	}
	if s.rules.InFlight > 0 {
		return min(int64(s.rules.InFlight), g)
	}
	return g
}

func mustParam(name string) paramInfo {
	info, ok := lookupParam(name)
	if !ok {
		panic("search: unknown parameter " + name)
	}
	return info
}

// Split is the throughput-shaped starting point with k batch threads under
// a closed-loop load: the rows in the server shared over k threads, a
// max_batch_size that holds a share, the longest timeout the SLO/3 rule
// allows (a full batch closes early anyway), the shortest queue that holds
// every row in the server (TF Serving turns a request away when the queue
// is full; the k batches being run and the queued ones hold k + queue
// batches), and the fewest gRPC threads that admit every request. ok is
// false when the space cannot express it (no max_batch_size, no
// closed-loop load) or the point is not runnable.
func (s *Space) Split(k int64) (Config, bool) {
	return s.shapedSplit(s.rules.InFlight, k, splitShare, false)
}

// SplitSmall is Split(k) with a smaller batch: max_batch_size at the
// geometric middle between the space's smallest value and Split's share,
// the lower end of a bracket around the batch size that Split's points
// take from above. Where batching barely pays (a CPU model whose cost
// grows with every row) the best batches are small, and no other start
// comes near them.
func (s *Space) SplitSmall(k int64) (Config, bool) {
	return s.shapedSplit(s.rules.InFlight, k, splitSmall, false)
}

// SplitFull is Split(k) with a batch the rows can fill: where the space has
// no max_batch_size equal to the share, Split rounds up, to a batch that
// holds the share but that the rows in the server never fill, so it closes
// on its timeout every time, and the longest timeout (Split's choice,
// because a full batch closes early anyway) is then pure waiting.
// SplitFull rounds down instead (to the space's smallest value when even
// that is above the share), keeping the longest timeout, with the queue
// that holds every row.
func (s *Space) SplitFull(k int64) (Config, bool) {
	return s.shapedSplit(s.rules.InFlight, k, splitFull, false)
}

// The shapes of a split's batch size.
const (
	splitShare = iota // the smallest value that holds the share (Split)
	splitSmall        // the geometric middle below it (SplitSmall)
	splitFull         // the largest value the share fills (SplitFull)
)

// shapedSplit is a split of rows in the server (Rules.InFlight, or the
// burst's guess, Rules.Burst) over k threads; what it leaves alone stays
// at TF's defaults (defaults(autoCores)).
func (s *Space) shapedSplit(rows int, k int64, shape int, autoCores bool) (Config, bool) {
	if !s.hasStructure() || rows <= 0 {
		return nil, false
	}
	idx := s.baseIndex(autoCores)
	if i, ok := s.byName[GRPCMaxThreads]; ok {
		idx[i] = s.atLeast(i, int64(rows))
	}
	cap := min(int64(rows), s.grpcThreads(s.valAt(idx)))
	threads := s.fixedValue(mustParam(NumBatchThreads))
	if i, ok := s.byName[NumBatchThreads]; ok {
		idx[i] = s.snapIndex(i, k)
		k = s.params[i].Values[idx[i]]
		threads = k
	}
	share := ceilDiv(cap, k)
	mbs := s.byName[MaxBatchSize]
	if shape == splitSmall {
		lo := s.params[mbs].Values[0]
		share = int64(math.Ceil(math.Sqrt(float64(lo) * float64(share))))
	}
	idx[mbs] = s.atLeast(mbs, share)
	if shape == splitFull && s.params[mbs].Values[idx[mbs]] > share && idx[mbs] > 0 {
		idx[mbs]--
	}
	if i, ok := s.byName[BatchTimeoutMicros]; ok {
		idx[i] = s.longestRunnable(idx, i)
	}
	if i, ok := s.byName[MaxEnqueuedBatches]; ok {
		idx[i] = s.atLeast(i, queueFor(cap, threads, s.params[mbs].Values[idx[mbs]]))
	}
	return s.runnableAt(idx)
}

// fittedDefaults is TF's defaults snapped into the space
// (defaults(autoCores)) with max_batch_size cut to the smallest value the
// space holds that is at least the rows the configuration can have in the
// server (inServer): no batch it forms is larger.
func (s *Space) fittedDefaults(autoCores bool) Config {
	c := s.defaults(autoCores)
	i, ok := s.byName[MaxBatchSize]
	idx, in := s.indexOf(c)
	if !ok || !in {
		return c
	}
	if rows := s.inServer(s.valAt(idx)); s.params[i].Values[idx[i]] > rows {
		idx[i] = s.atLeast(i, rows)
	}
	return s.configAt(idx)
}

// baseIndex is the index vector of TF's defaults snapped into the space
// (defaults(autoCores)): what a starting point leaves alone.
func (s *Space) baseIndex(autoCores bool) []int {
	idx, ok := s.indexOf(s.defaults(autoCores))
	if !ok {
		idx = make([]int, len(s.params))
	}
	return idx
}

func (s *Space) valAt(idx []int) func(string) (int64, bool) {
	return func(name string) (int64, bool) {
		i, ok := s.byName[name]
		if !ok {
			return 0, false
		}
		return s.params[i].Values[idx[i]], true
	}
}

// atLeast is the index of the smallest value of parameter i that is at
// least v, or of the largest value when none is.
func (s *Space) atLeast(i int, v int64) int {
	vals := s.params[i].Values
	for j, x := range vals {
		if x >= v {
			return j
		}
	}
	return len(vals) - 1
}

// longestRunnable is the index of the largest value of parameter i that
// keeps idx runnable (the SLO/3 rule), or its current index when none does.
func (s *Space) longestRunnable(idx []int, i int) int {
	keep := idx[i]
	for j := len(s.params[i].Values) - 1; j >= 0; j-- {
		idx[i] = j
		if s.isRunnable(idx) {
			return j
		}
	}
	idx[i] = keep
	return keep
}

func (s *Space) runnableAt(idx []int) (Config, bool) {
	if !s.isRunnable(idx) {
		return nil, false
	}
	return s.configAt(idx), true
}

// modelInputs is what the Bayesian models see of a configuration: its
// position in the unit cube and the structural inputs.
func (s *Space) modelInputs(c Config) ([]float64, bool) {
	x, ok := s.features(c)
	if !ok {
		return nil, false
	}
	return s.structural(x, c.Get), true
}

func (s *Space) modelInputsAt(idx []int) []float64 {
	return s.structural(s.featuresAt(idx), s.valAt(idx))
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
