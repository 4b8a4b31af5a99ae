package tuner

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// maxInfraRetries bounds the re-measurements of one confirmation repeat
// after infrastructure failures.
const maxInfraRetries = 2

// infraRetryPause lets a port or a crashed server's resources go before
// the repeat is measured again.
var infraRetryPause = time.Second

// infraPrefix starts the Why of a repeat measured again.
const infraRetryNote = " (again, after an infrastructure failure)"

// infraFailure reports whether a failed trial failed for a reason of the
// machine rather than of its configuration: the server could not be
// started, could not bind its port, crashed (other than running out of
// memory, which a configuration can cause), or never became reachable.
// Such a trial is retried in confirmation and never counted as a repeat
// that missed the SLO.
func infraFailure(tr *store.Trial) bool {
	if tr.State != store.TrialFailed {
		return false
	}
	text := strings.ToLower(tr.Reason + "\n" + tr.LogTail)
	switch {
	case strings.Contains(text, "resource exhausted"), strings.Contains(text, "out of memory"), strings.Contains(text, "oom"):
		return false // the configuration's (a batch too big for the memory)
	case strings.HasPrefix(tr.Reason, "start: "):
		return true
	case strings.Contains(text, "address already in use"), strings.Contains(text, "failed to bind"):
		return true
	case strings.HasPrefix(tr.Reason, "server exited: "):
		return true
	case strings.Contains(text, "not ready after") && (strings.Contains(text, "unreachable") || strings.Contains(text, "timeout")):
		return true
	}
	return false
}

// measureRepeat runs one confirmation repeat (tr, stored as suggested)
// and, while it fails for an infrastructure reason, measures it again as a
// new trial, up to maxInfraRetries times. Each failed attempt stays in
// trials, recorded with its reason; infraFailure keeps it out of the
// candidate's tally. tr ends as the last attempt.
func (t *Tuner) measureRepeat(ctx context.Context, tr *store.Trial, launch runtime.Config, st stage, trials *[]store.Trial) error {
	for attempt := 0; ; attempt++ {
		err := t.runTrial(ctx, tr, launch, st)
		portTaken := err != nil && errors.Is(err, runtime.ErrPortInUse)
		if err != nil && !portTaken {
			return err
		}
		if !portTaken && !infraFailure(tr) {
			return nil
		}
		if attempt == maxInfraRetries {
			t.log.Warn("confirmation repeat failed for an infrastructure reason every time; not counted", "trial", tr.Seq, "reason", tr.Reason)
			return err
		}
		t.log.Warn("infrastructure failure in a confirmation repeat; measuring it again", "trial", tr.Seq, "reason", tr.Reason)
		select {
		case <-ctx.Done():
			return nil // the next stopping check records the interruption
		case <-time.After(infraRetryPause):
		}
		*trials = append(*trials, *tr)
		next := store.Trial{Study: tr.Study, Run: tr.Run, Role: tr.Role, Config: tr.Config, State: store.TrialSuggested,
			Why: strings.TrimSuffix(tr.Why, infraRetryNote) + infraRetryNote}
		if err := t.put(ctx, &next, st, true); err != nil {
			return err
		}
		*tr = next
	}
}
