package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

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
		return fmt.Errorf("%w: %s: unknown kind %q (want %s, %s or %s)", ErrInvalid, runName(r.Study, r.ID), r.Kind, KindOneShot, KindScheduled, KindAPI)
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
