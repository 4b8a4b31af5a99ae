package probe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/batchtune/batchtune/configs"
)

// WarmupOptions configures Warmup. Zero fields take the defaults named;
// the zero value warms up until latency settles.
type WarmupOptions struct {
	// Requests is the fewest successful requests to send; 0 requires none.
	Requests int64
	// UntilSettled keeps warming, after Requests, until latency settles.
	// It is implied when Requests is 0.
	UntilSettled bool
	// MaxDuration caps the warmup; default 30s. Reaching it is not an
	// error: WarmupResult.Settled says whether latency settled.
	MaxDuration time.Duration
	// MinDuration is the shortest warmup that waits for settling; default 1s.
	MinDuration time.Duration
	// Bucket is the length over which each median is taken; default 250ms.
	Bucket time.Duration
	// Tolerance: latency has settled when the medians of the last three
	// buckets (each with >= 10 successful requests) lie within ±Tolerance
	// of their mean; default 0.10.
	Tolerance float64
	Progress  func(Progress)
}

// WarmupResult says how a warmup went. Its requests count in no figure of
// a later Measure.
type WarmupResult struct {
	Requests   int64           `json:"requests"`
	Errors     int64           `json:"errors"`
	Duration   time.Duration   `json:"duration_ns"`
	Settled    bool            `json:"settled"`
	StopReason StopReason      `json:"stop_reason"`
	Medians    []time.Duration `json:"medians_ns"` // per bucket, the curve that settled
}

// Warmup sends the load until opts.Requests have succeeded and, when asked
// (or when no count is given), latency has settled; after one checked request: a payload the server rejects fails here with
// ErrRequestsFail and the server's words, as does a warmup in which every
// request failed.
func (c *Client) Warmup(ctx context.Context, load Load, o *WarmupOptions) (*WarmupResult, error) {
	var w WarmupOptions
	if o != nil {
		w = *o
	}
	if w.MaxDuration == 0 {
		w.MaxDuration = 30 * time.Second
	}
	if w.MinDuration == 0 {
		w.MinDuration = time.Second
	}
	if w.Bucket == 0 {
		w.Bucket = 250 * time.Millisecond
	}
	if w.Tolerance == 0 {
		w.Tolerance = 0.10
	}
	var ps configs.Problems
	load.problems(&ps)
	if w.Requests < 0 {
		ps.Add("warmup.requests", "must be >= 0, got %d", w.Requests)
	}
	if w.Bucket < tick {
		ps.Add("warmup.bucket", "must be >= %s, got %s", tick, w.Bucket)
	}
	if !(w.Tolerance > 0 && w.Tolerance < 1) {
		ps.Add("warmup.tolerance", "must be in (0, 1), got %g", w.Tolerance)
	}
	if w.MinDuration > w.MaxDuration {
		ps.Add("warmup.min_duration", "%s is over max_duration %s", w.MinDuration, w.MaxDuration)
	}
	if err := ps.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if err := c.Check(ctx); err != nil {
		return nil, err
	}
	untilSettled := w.UntilSettled || w.Requests == 0
	spec := runSpec{
		load: load, phase: PhaseWarming, bucket: w.Bucket, drain: 2 * time.Second, progress: w.Progress,
		decide: func(now int64, a *aggregator, _ int, _ bool) (StopReason, string) {
			if a.byCode[codes.OK] >= w.Requests {
				if !untilSettled {
					return StopWarmupCount, ""
				}
				if now >= int64(w.MinDuration) && settled(a.lastP50s(10), w.Tolerance) {
					return StopWarmedUp, ""
				}
			}
			if now >= int64(w.MaxDuration) {
				return StopMaxDuration, ""
			}
			return "", ""
		},
	}
	out := c.run(ctx, spec)
	a := out.a
	res := &WarmupResult{
		Requests: a.completed(), Errors: a.failed(), Duration: time.Duration(out.stopAt),
		StopReason: out.reason, Settled: out.reason == StopWarmedUp || out.reason == StopWarmupCount,
		Medians: a.lastP50s(1),
	}
	if out.cause != nil {
		return res, fmt.Errorf("probe: warmup cancelled: %w", out.cause)
	}
	if res.Requests > 0 && res.Errors == res.Requests {
		var codesSeen []string
		for code, n := range a.byCode {
			if n > 0 {
				codesSeen = append(codesSeen, fmt.Sprintf("%s ×%d", codes.Code(code), n))
			}
		}
		return res, fmt.Errorf("%w: warmup: all %d requests failed (%s)", ErrRequestsFail, res.Requests, strings.Join(codesSeen, ", "))
	}
	return res, nil
}
