package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketVerifs holds a study's acceptance soaks:
// studies/<name>/verifications/<seq>. Stores written before verify existed
// lack it; it is created by the first AddVerification and read as empty
// when absent, so the layout version is unchanged.
var bucketVerifs = []byte("verifications")

// Verdicts of a verification.
const (
	VerifyPassed = "passed" // every interval met the SLO, errors under the bound, rate kept
	VerifyFailed = "failed" // the configuration broke one of them
	// VerifyInvalid: the load generator limited the soak (its CPU, its
	// pacing), so the configuration was not judged.
	VerifyInvalid = "invalid"
	// VerifyError: the server did not start, become ready or warm up.
	VerifyError = "error"
)

// Verification is one acceptance soak (batchtune verify, or the daemon's
// schedule.verify): a configuration held at a rate for a duration, judged
// interval by interval.
type Verification struct {
	Study string `json:"study"`
	// Seq numbers the study's verifications from 1.
	Seq uint64 `json:"seq"`
	// Run and Recommendation name the run and recommendation verified; 0
	// when the configuration was given by hand (Source says which).
	Run            uint64 `json:"run,omitempty"`
	Recommendation uint64 `json:"recommendation,omitempty"`
	Source         string `json:"source"`
	// Config is the configuration's parameters as far as they are known
	// (resolved from the batching.config); Batching and Flags are what the
	// server ran with.
	Config   []Param  `json:"config,omitempty"`
	Batching string   `json:"batching"`
	Flags    []string `json:"flags,omitempty"`

	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Interval time.Duration `json:"interval_ns"`
	// Rate is the rate held (req/s) and RateSource where it came from
	// ("capacity_low 812.0 x headroom 0.65", "--rate").
	Rate       float64 `json:"rate"`
	RateSource string  `json:"rate_source,omitempty"`
	// The bounds judged against: the SLO's latency for its Quantile in
	// every interval, and the overall error rate.
	SLO          time.Duration `json:"slo_ns"`
	Quantile     float64       `json:"quantile"`
	MaxErrorRate float64       `json:"max_error_rate"`

	// Verdict is VerifyPassed, VerifyFailed, VerifyInvalid or VerifyError;
	// Failures lists each broken criterion in words, Causes the likely
	// reasons read from the server's metrics, most likely first.
	Verdict  string   `json:"verdict"`
	Failures []string `json:"failures,omitempty"`
	Causes   []Cause  `json:"causes,omitempty"`

	// The whole soak: requests completed (and never answered), errors by
	// gRPC code, the error rate counting unanswered requests as failed,
	// achieved and sent rates, and latency over all intervals.
	Requests   int64            `json:"requests"`
	OK         int64            `json:"ok"`
	Unfinished int64            `json:"unfinished,omitempty"`
	Errors     map[string]int64 `json:"errors,omitempty"`
	ErrorRate  float64          `json:"error_rate"`
	Achieved   float64          `json:"achieved"`
	SentRate   float64          `json:"sent_rate"`
	RateKept   bool             `json:"rate_kept"`
	RateNote   string           `json:"rate_note,omitempty"`
	P50        time.Duration    `json:"p50_ns"`
	P99        time.Duration    `json:"p99_ns"`
	// MeanBatch and QueueShare are the server's over the whole soak.
	MeanBatch  float64 `json:"mean_batch,omitempty"`
	QueueShare float64 `json:"queue_share,omitempty"`
	// Note carries what else the reader must know (a failed scrape, the
	// generator's invalid reason, a server that exited).
	Note string `json:"note,omitempty"`

	Intervals []VerifyInterval `json:"intervals"`
}

// VerifyInterval is one interval of a soak.
type VerifyInterval struct {
	Start time.Duration `json:"start_ns"`
	Dur   time.Duration `json:"duration_ns"`
	// Sent is the offered requests sent in the interval; OK and Errors
	// those completed in it. Rate is OK per second.
	Sent   int64   `json:"sent"`
	OK     int64   `json:"ok"`
	Errors int64   `json:"errors"`
	Rate   float64 `json:"rate"`
	// Latency from the intended send time: the median, the SLO's
	// quantile (Quantile, P99 by default) and the maximum.
	P50      time.Duration `json:"p50_ns"`
	Quantile time.Duration `json:"quantile_ns"`
	Max      time.Duration `json:"max_ns"`
	// From the server's metrics over the interval: mean batch size, the
	// share of latency spent queueing for a batch, and requests the server
	// refused as UNAVAILABLE (a full batch queue).
	MeanBatch  float64 `json:"mean_batch,omitempty"`
	QueueShare float64 `json:"queue_share,omitempty"`
	Rejected   float64 `json:"rejected,omitempty"`
	// Over is set when the interval's quantile broke the SLO.
	Over bool `json:"over,omitempty"`
}

// Cause is a likely reason for a failed soak, named by the setting or the
// part to look at, with the evidence.
type Cause struct {
	// Name is short and stable: queue_full, batch_timeout, threads,
	// connections, over_capacity, trend, stall, errors, generator.
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// AddVerification appends v to its study's verifications and sets v.Seq.
// The study must exist.
func (db *DB) AddVerification(ctx context.Context, v *Verification) error {
	if v.Study == "" {
		return fmt.Errorf("%w: verification has no study", ErrInvalid)
	}
	rec := *v
	err := db.update(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, rec.Study)
		if err != nil {
			return err
		}
		if rec.Run != 0 && sb.Bucket(bucketRuns).Bucket(key(rec.Run)) == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, runName(rec.Study, rec.Run))
		}
		vb, err := sb.CreateBucketIfNotExists(bucketVerifs)
		if err != nil {
			return err
		}
		seq, err := vb.NextSequence()
		if err != nil {
			return err
		}
		rec.Seq = seq
		return putRecord(vb, key(seq), rec)
	})
	if err != nil {
		return err
	}
	*v = rec
	return nil
}

// Verifications returns the study's verifications, oldest first; none for
// a study (or a store) that never ran one.
func (db *DB) Verifications(ctx context.Context, study string) ([]Verification, error) {
	var out []Verification
	err := db.view(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, study)
		if err != nil {
			return err
		}
		vb := sb.Bucket(bucketVerifs)
		if vb == nil {
			return nil
		}
		return vb.ForEach(func(k, val []byte) error {
			seq, ok := seqOf(k)
			if !ok {
				return fmt.Errorf("%w: study %s has a verification key of %d bytes", ErrCorrupt, study, len(k))
			}
			var v Verification
			if err := decode(val, fmt.Sprintf("verification %d of study %s", seq, study), &v); err != nil {
				return err
			}
			out = append(out, v)
			return nil
		})
	})
	return out, err
}

// LatestVerification returns the study's latest verification of run (any
// run when run is 0), or ErrNotFound.
func (db *DB) LatestVerification(ctx context.Context, study string, run uint64) (*Verification, error) {
	vs, err := db.Verifications(ctx, study)
	if err != nil {
		return nil, err
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if run == 0 || vs[i].Run == run {
			return &vs[i], nil
		}
	}
	what := "study " + study
	if run != 0 {
		what = runName(study, run)
	}
	return nil, fmt.Errorf("%w: no verification of %s", ErrNotFound, what)
}
