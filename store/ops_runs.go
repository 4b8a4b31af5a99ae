package store

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CreateRun adds r as the study's next run: it sets r.ID, and r.State to
// running and r.Started to now when they are unset. The study must exist.
func (db *DB) CreateRun(ctx context.Context, r *Run) error {
	rec := *r
	if rec.State == "" {
		rec.State = RunRunning
	}
	if rec.Started.IsZero() {
		rec.Started = time.Now().UTC()
	}
	if err := validRun(&rec); err != nil {
		return err
	}
	err := db.update(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, rec.Study)
		if err != nil {
			return err
		}
		runs := sb.Bucket(bucketRuns)
		id, err := runs.NextSequence()
		if err != nil {
			return err
		}
		rec.ID = id
		rb, err := runs.CreateBucket(key(id))
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketTrials, bucketMeas} {
			if _, err := rb.CreateBucket(name); err != nil {
				return err
			}
		}
		return putRecord(rb, keyRun, rec)
	})
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

// PutRun writes r over the stored run r.Study/r.ID.
func (db *DB) PutRun(ctx context.Context, r *Run) error {
	if err := validRun(r); err != nil {
		return err
	}
	return db.update(ctx, func(tx *bolt.Tx) error {
		rb, err := runBucket(tx, r.Study, r.ID)
		if err != nil {
			return err
		}
		return putRecord(rb, keyRun, *r)
	})
}

// Run returns run id of study, or ErrNotFound.
func (db *DB) Run(ctx context.Context, study string, id uint64) (*Run, error) {
	var r Run
	err := db.view(ctx, func(tx *bolt.Tx) error {
		rb, err := runBucket(tx, study, id)
		if err != nil {
			return err
		}
		return decode(rb.Get(keyRun), runName(study, id), &r)
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Runs returns the study's runs in the order they were created.
func (db *DB) Runs(ctx context.Context, study string) ([]Run, error) {
	var out []Run
	err := db.view(ctx, func(tx *bolt.Tx) error {
		sb, err := studyBucket(tx, study)
		if err != nil {
			return err
		}
		return forEachRun(sb, study, func(_ *bolt.Bucket, r Run) error {
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// LatestUnfinishedRun returns the study's latest run when it is still
// running or interrupted, or ErrNotFound when it ended (or there is none).
func (db *DB) LatestUnfinishedRun(ctx context.Context, study string) (*Run, error) {
	var found *Run
	err := db.view(ctx, func(tx *bolt.Tx) error {
		r, _, err := latestUnfinished(tx, study)
		found = r
		return err
	})
	return found, err
}

// ResumeRun prepares the study's latest unfinished run to go on, in one
// transaction: its trials left in an unfinished state (the process that
// ran them stopped mid-trial) become interrupted, with reason and the
// time now, and the run becomes running again. It returns the run and all
// its trials in order; finished trials are not to be redone, interrupted
// ones are. ErrNotFound means there is nothing to resume.
//
// Only the process that will run the study may call it: a run still
// running in another process would have its live trials marked.
func (db *DB) ResumeRun(ctx context.Context, study, reason string, now time.Time) (*Run, []Trial, error) {
	var (
		run    *Run
		trials []Trial
		marked int
	)
	err := db.update(ctx, func(tx *bolt.Tx) error {
		r, rb, err := latestUnfinished(tx, study)
		if err != nil {
			return err
		}
		tb := rb.Bucket(bucketTrials)
		var all []Trial
		err = forEachTrial(tb, study, r.ID, func(t Trial) error {
			all = append(all, t)
			return nil
		})
		if err != nil {
			return err
		}
		for i := range all {
			if all[i].State.Terminal() {
				continue
			}
			all[i].Reason = reason
			all[i].Transition(TrialInterrupted, now)
			if err := putTrial(rb, &all[i]); err != nil {
				return err
			}
			marked++
		}
		r.State = RunRunning
		r.Ended = time.Time{}
		if err := putRecord(rb, keyRun, *r); err != nil {
			return err
		}
		run, trials = r, all
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	db.log.Debug("run resumed", "study", study, "run", run.ID, "trials", len(trials), "interrupted", marked)
	return run, trials, nil
}
