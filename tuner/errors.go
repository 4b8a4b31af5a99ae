package tuner

import "errors"

var (
	// ErrTooManyFailures stops a study whose trials keep failing: the
	// target, not the configurations, is likely at fault.
	ErrTooManyFailures = errors.New("tuner: too many consecutive failed trials")
	// ErrTooManyRejections stops a study whose strategy keeps proposing
	// configurations the hard rules forbid.
	ErrTooManyRejections = errors.New("tuner: too many consecutive rejected suggestions")
	// ErrNoFeasible is reported (not returned) when no configuration met
	// the SLO: nothing is recommended.
	ErrNoFeasible = errors.New("tuner: no configuration met the SLO")
	// ErrInterrupted is returned when the run was stopped by its context;
	// the run is left resumable.
	ErrInterrupted = errors.New("tuner: run interrupted")
)
