// Package daemon keeps studies tuned over time: it runs each study of a
// directory on its own cron schedule, warm-started against the incumbent,
// rolls accepted changes out, and says what it is doing over a JSON API and
// Prometheus metrics. `batchtune daemon` is a thin command over it.
//
// Data flows through it like this:
//
//	studies dir ──load/Reload──► studies (spec, Schedule, Target)
//	Schedule.Next (Clock) ──due──► queue ◄── Trigger (API), unfinished runs (startup)
//	queue ──dispatch: one run per target, MaxParallel at once──► Runner.Run
//	    (TunerRunner: runtime.New + tuner.Run, RunOptions{Kind scheduled, WarmStart})
//	tuner events ──► progress (API), trial metrics
//	tuner.Report ──► run metrics, decision (degradation), rollout command
//	store.DB ◄────── everything the API reads about runs, trials, recommendations
//
// The store is the source of truth and the daemon keeps nothing a restart
// could lose: a run interrupted by a stop or a crash is unfinished in the
// store, and the next Run resumes it first. Two runs never restart the same
// server at once (Target.Conflicts); by default only one runs at a time at
// all, because the load generator shares this machine with every run.
//
// The package never prints, exits or handles signals: the command maps
// SIGTERM to Run's drain channel (and a second one to cancelling its
// context) and SIGHUP to Reload. Time comes from a Clock, so tests drive
// the schedule.
package daemon
