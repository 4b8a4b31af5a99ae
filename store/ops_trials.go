package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// AddTrial adds t as the next trial of run t.Run: it sets t.Seq, and
// records the first phase when t has none. The run must exist.
func (db *DB) AddTrial(ctx context.Context, t *Trial) error {
	rec := *t
	if len(rec.Phases) == 0 && rec.State != "" {
		rec.Phases = []Phase{{State: rec.State, At: time.Now().UTC()}}
	}
	if err := validTrial(&rec); err != nil {
		return err
	}
	err := db.update(ctx, func(tx *bolt.Tx) error {
		rb, err := runBucket(tx, rec.Study, rec.Run)
		if err != nil {
			return err
		}
		tb := rb.Bucket(bucketTrials)
		seq, err := tb.NextSequence()
		if err != nil {
			return err
		}
		rec.Seq = seq
		return putTrial(rb, &rec)
	})
	if err != nil {
		return err
	}
	*t = rec
	return nil
}

// putTrial writes t into run bucket rb: the trial record, and its
// measurement beside it when t has one.
func putTrial(rb *bolt.Bucket, t *Trial) error {
	rec := *t
	rec.Measurement = nil
	if err := putRecord(rb.Bucket(bucketTrials), key(t.Seq), rec); err != nil {
		return err
	}
	if len(t.Measurement) == 0 {
		return nil
	}
	return putRecord(rb.Bucket(bucketMeas), key(t.Seq), measurementRecord{Measurement: t.Measurement})
}

// PutTrial writes t over the stored trial t.Study/t.Run/t.Seq, in its own
// transaction, synced before it returns: a trial written here survives a
// crash that follows. A trial in a terminal state keeps it: PutTrial
// refuses to change the state of a finished trial.
func (db *DB) PutTrial(ctx context.Context, t *Trial) error {
	if err := validTrial(t); err != nil {
		return err
	}
	return db.update(ctx, func(tx *bolt.Tx) error {
		rb, err := runBucket(tx, t.Study, t.Run)
		if err != nil {
			return err
		}
		tb := rb.Bucket(bucketTrials)
		what := trialName(t.Study, t.Run, t.Seq)
		old := tb.Get(key(t.Seq))
		if old == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, what)
		}
		var prev Trial
		if err := decode(old, what, &prev); err != nil {
			return err
		}
		if prev.State.Terminal() && prev.State != t.State {
			return fmt.Errorf("%w: %s is already %s; a finished trial keeps its state (got %s)", ErrInvalid, what, prev.State, t.State)
		}
		return putTrial(rb, t)
	})
}

// Trial returns one trial, or ErrNotFound.
func (db *DB) Trial(ctx context.Context, study string, run, seq uint64) (*Trial, error) {
	var t Trial
	err := db.view(ctx, func(tx *bolt.Tx) error {
		rb, err := runBucket(tx, study, run)
		if err != nil {
			return err
		}
		what := trialName(study, run, seq)
		v := rb.Bucket(bucketTrials).Get(key(seq))
		if v == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, what)
		}
		if err := decode(v, what, &t); err != nil {
			return err
		}
		if m := rb.Bucket(bucketMeas).Get(key(seq)); m != nil {
			var mr measurementRecord
			if err := decode(m, "measurement of "+what, &mr); err != nil {
				return err
			}
			t.Measurement = mr.Measurement
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// Trials returns the trials of one run in the order they were added,
// without their measurements (DB.Trial has them).
func (db *DB) Trials(ctx context.Context, study string, run uint64) ([]Trial, error) {
	var out []Trial
	err := db.view(ctx, func(tx *bolt.Tx) error {
		rb, err := runBucket(tx, study, run)
		if err != nil {
			return err
		}
		return forEachTrial(rb.Bucket(bucketTrials), study, run, func(t Trial) error {
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// StudyTrials returns the trials of every run of the study, run by run,
// each run's in order: the history a warm start builds on.
func (db *DB) StudyTrials(ctx context.Context, study string) ([]Trial, error) {
	var out []Trial
	err := db.view(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, study)
		if err != nil {
			return err
		}
		return forEachRun(sb, study, func(rb *bolt.Bucket, r Run) error {
			return forEachTrial(rb.Bucket(bucketTrials), study, r.ID, func(t Trial) error {
				out = append(out, t)
				return nil
			})
		})
	})
	return out, err
}
