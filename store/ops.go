package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// PutStudy creates the study s.Name or updates its spec snapshot. Created
// is kept from the stored study; Updated is set to now when zero.
func (db *DB) PutStudy(ctx context.Context, s *Study) error {
	if s.Name == "" {
		return fmt.Errorf("%w: study has no name", ErrInvalid)
	}
	return db.update(ctx, func(tx *bolt.Tx) error {
		sb, err := tx.Bucket(bucketStudies).CreateBucketIfNotExists([]byte(s.Name))
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketRuns, bucketRecs} {
			if _, err := sb.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		rec := *s
		if old := sb.Get(keyStudy); old != nil {
			var prev Study
			if err := decode(old, "study "+s.Name, &prev); err != nil {
				return err
			}
			rec.Created = prev.Created
		}
		if rec.Created.IsZero() {
			rec.Created = time.Now().UTC()
		}
		if rec.Updated.IsZero() {
			rec.Updated = time.Now().UTC()
		}
		v, err := encode(rec)
		if err != nil {
			return err
		}
		if err := sb.Put(keyStudy, v); err != nil {
			return err
		}
		*s = rec
		return nil
	})
}

// Study returns the stored study name, or ErrNotFound.
func (db *DB) Study(ctx context.Context, name string) (*Study, error) {
	var s Study
	err := db.view(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, name)
		if err != nil {
			return err
		}
		return decode(sb.Get(keyStudy), "study "+name, &s)
	})
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Studies returns every stored study, by name.
func (db *DB) Studies(ctx context.Context) ([]Study, error) {
	var out []Study
	err := db.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStudies).ForEachBucket(func(k []byte) error {
			var s Study
			if err := decode(tx.Bucket(bucketStudies).Bucket(k).Get(keyStudy), "study "+string(k), &s); err != nil {
				return err
			}
			out = append(out, s)
			return nil
		})
	})
	return out, err
}
