package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FinishRun records the end of run r in one transaction: r itself (its
// state, outcome, detail and export record), and rec, when not nil, as
// the run's recommendation. A rec with Seq 0 is appended to the study's
// history (setting rec.Seq, and rec.Time to now when zero); one with a
// Seq is written over the stored one. r.Recommendation is set to rec.Seq.
//
// rec may be Accepted (become the study's incumbent) only when r finished
// with OutcomeRecommended and exported: a failed run, or one whose export
// failed, leaves the incumbent as it was, even if the process dies
// between the export and this call.
func (db *DB) FinishRun(ctx context.Context, r *Run, rec *Recommendation) error {
	run := *r
	if rec != nil && rec.Accepted && (run.State != RunFinished || run.Outcome != OutcomeRecommended) {
		return fmt.Errorf("%w: %s ended %s/%s and cannot set the incumbent", ErrInvalid, runName(run.Study, run.ID), run.State, run.Outcome)
	}
	if err := validRun(&run); err != nil {
		return err
	}
	var stored Recommendation
	if rec != nil {
		stored = *rec
		if stored.Time.IsZero() {
			stored.Time = time.Now().UTC()
		}
		if stored.Study != run.Study || stored.Run != run.ID {
			return fmt.Errorf("%w: recommendation of %s given to %s", ErrInvalid, runName(stored.Study, stored.Run), runName(run.Study, run.ID))
		}
	}
	err := db.update(ctx, func(tx *bolt.Tx) error {
		rb, err := runBucket(tx, run.Study, run.ID)
		if err != nil {
			return err
		}
		if rec != nil {
			sb, err := studyBucket(tx, run.Study)
			if err != nil {
				return err
			}
			recs := sb.Bucket(bucketRecs)
			if stored.Seq == 0 {
				if stored.Seq, err = recs.NextSequence(); err != nil {
					return err
				}
			} else if recs.Get(key(stored.Seq)) == nil {
				return fmt.Errorf("%w: recommendation %d of study %s", ErrNotFound, stored.Seq, stored.Study)
			}
			if err := putRecord(recs, key(stored.Seq), stored); err != nil {
				return err
			}
			run.Recommendation = stored.Seq
		}
		return putRecord(rb, keyRun, run)
	})
	if err != nil {
		return err
	}
	*r = run
	if rec != nil {
		*rec = stored
	}
	return nil
}
