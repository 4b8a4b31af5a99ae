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

func studyBucket(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	sb := tx.Bucket(bucketStudies).Bucket([]byte(name))
	if sb == nil {
		return nil, fmt.Errorf("%w: study %s", ErrNotFound, name)
	}
	if sb.Bucket(bucketRuns) == nil || sb.Bucket(bucketRecs) == nil {
		return nil, fmt.Errorf("%w: study %s lacks its runs or recommendations bucket", ErrCorrupt, name)
	}
	return sb, nil
}

func runBucket(tx *bolt.Tx, study string, id uint64) (*bolt.Bucket, error) {
	sb, err := studyBucket(tx, study)
	if err != nil {
		return nil, err
	}
	rb := sb.Bucket(bucketRuns).Bucket(key(id))
	if rb == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, runName(study, id))
	}
	if rb.Bucket(bucketTrials) == nil || rb.Bucket(bucketMeas) == nil {
		return nil, fmt.Errorf("%w: %s lacks its trials or measurements bucket", ErrCorrupt, runName(study, id))
	}
	return rb, nil
}

// forEachRun calls fn for each run of the study bucket sb in ID order.
func forEachRun(sb *bolt.Bucket, study string, fn func(rb *bolt.Bucket, r Run) error) error {
	runs := sb.Bucket(bucketRuns)
	return runs.ForEachBucket(func(k []byte) error {
		id, ok := seqOf(k)
		if !ok {
			return fmt.Errorf("%w: study %s has a run key of %d bytes", ErrCorrupt, study, len(k))
		}
		rb := runs.Bucket(k)
		var r Run
		if err := decode(rb.Get(keyRun), runName(study, id), &r); err != nil {
			return err
		}
		return fn(rb, r)
	})
}

// forEachTrial calls fn for each trial in bucket tb in sequence order.
func forEachTrial(tb *bolt.Bucket, study string, run uint64, fn func(Trial) error) error {
	return tb.ForEach(func(k, v []byte) error {
		seq, ok := seqOf(k)
		if !ok {
			return fmt.Errorf("%w: %s has a trial key of %d bytes", ErrCorrupt, runName(study, run), len(k))
		}
		var t Trial
		if err := decode(v, trialName(study, run, seq), &t); err != nil {
			return err
		}
		return fn(t)
	})
}

// latestUnfinished returns the study's latest run when it is unfinished.
// An unfinished run followed by a newer one was abandoned and is not
// resumed.
func latestUnfinished(tx *bolt.Tx, study string) (*Run, *bolt.Bucket, error) {
	sb, err := studyBucket(tx, study)
	if err != nil {
		return nil, nil, err
	}
	runs := sb.Bucket(bucketRuns)
	k, v := runs.Cursor().Last()
	if k == nil {
		return nil, nil, fmt.Errorf("%w: study %s has no run", ErrNotFound, study)
	}
	id, ok := seqOf(k)
	if !ok || v != nil {
		return nil, nil, fmt.Errorf("%w: study %s has a malformed run key", ErrCorrupt, study)
	}
	rb := runs.Bucket(k)
	var r Run
	if err := decode(rb.Get(keyRun), runName(study, id), &r); err != nil {
		return nil, nil, err
	}
	if !r.State.Unfinished() {
		return nil, nil, fmt.Errorf("%w: the latest run of study %s (%d) is %s: nothing to resume", ErrNotFound, study, id, r.State)
	}
	return &r, rb, nil
}

func putRecord(b *bolt.Bucket, k []byte, rec any) error {
	v, err := encode(rec)
	if err != nil {
		return err
	}
	return b.Put(k, v)
}

func validRun(r *Run) error {
	switch {
	case r.Study == "":
		return fmt.Errorf("%w: run has no study", ErrInvalid)
	case !r.State.Valid():
		return fmt.Errorf("%w: %s: unknown state %q", ErrInvalid, runName(r.Study, r.ID), r.State)
	case !r.Kind.Valid():
		return fmt.Errorf("%w: %s: unknown kind %q (want %s or %s)", ErrInvalid, runName(r.Study, r.ID), r.Kind, KindOneShot, KindScheduled)
	case !r.Outcome.Valid():
		return fmt.Errorf("%w: %s: unknown outcome %q", ErrInvalid, runName(r.Study, r.ID), r.Outcome)
	}
	return nil
}

func validTrial(t *Trial) error {
	what := trialName(t.Study, t.Run, t.Seq)
	switch {
	case t.Study == "" || t.Run == 0:
		return fmt.Errorf("%w: trial names no study or run", ErrInvalid)
	case !t.State.Valid():
		return fmt.Errorf("%w: %s: unknown state %q", ErrInvalid, what, t.State)
	}
	for i, p := range t.Config {
		if p.Name == "" {
			return fmt.Errorf("%w: %s: config[%d] has no name", ErrInvalid, what, i)
		}
	}
	return nil
}

func runName(study string, id uint64) string { return fmt.Sprintf("run %d of study %s", id, study) }

func trialName(study string, run, seq uint64) string {
	return fmt.Sprintf("trial %d of run %d of study %s", seq, run, study)
}
