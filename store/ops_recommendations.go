package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// AddRecommendation appends r to the study's recommendation history and
// sets r.Seq (and r.Time to now when zero).
func (db *DB) AddRecommendation(ctx context.Context, r *Recommendation) error {
	rec := *r
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	if rec.Study == "" {
		return fmt.Errorf("%w: recommendation has no study", ErrInvalid)
	}
	err := db.update(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, rec.Study)
		if err != nil {
			return err
		}
		recs := sb.Bucket(bucketRecs)
		seq, err := recs.NextSequence()
		if err != nil {
			return err
		}
		rec.Seq = seq
		return putRecord(recs, key(seq), rec)
	})
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

// PutRecommendation writes r over the stored recommendation r.Study/r.Seq
// (to record that it was accepted or rolled back).
func (db *DB) PutRecommendation(ctx context.Context, r *Recommendation) error {
	return db.update(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, r.Study)
		if err != nil {
			return err
		}
		recs := sb.Bucket(bucketRecs)
		if recs.Get(key(r.Seq)) == nil {
			return fmt.Errorf("%w: recommendation %d of study %s", ErrNotFound, r.Seq, r.Study)
		}
		return putRecord(recs, key(r.Seq), *r)
	})
}

// Recommendations returns the study's recommendation history, oldest
// first.
func (db *DB) Recommendations(ctx context.Context, study string) ([]Recommendation, error) {
	var out []Recommendation
	err := db.view(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, study)
		if err != nil {
			return err
		}
		return sb.Bucket(bucketRecs).ForEach(func(k, v []byte) error {
			seq, _ := seqOf(k)
			var r Recommendation
			if err := decode(v, fmt.Sprintf("recommendation %d of study %s", seq, study), &r); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// Incumbent returns the study's latest accepted recommendation: the
// configuration in production as far as batchtune knows. ErrNotFound when
// none was accepted.
func (db *DB) Incumbent(ctx context.Context, study string) (*Recommendation, error) {
	var found *Recommendation
	err := db.view(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, study)
		if err != nil {
			return err
		}
		c := sb.Bucket(bucketRecs).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			seq, _ := seqOf(k)
			var r Recommendation
			if err := decode(v, fmt.Sprintf("recommendation %d of study %s", seq, study), &r); err != nil {
				return err
			}
			if r.Accepted {
				found = &r
				return nil
			}
		}
		return fmt.Errorf("%w: study %s has no accepted recommendation", ErrNotFound, study)
	})
	return found, err
}
