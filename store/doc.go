// Package store keeps what batchtune learns in one bbolt file: studies,
// their runs, each run's trials, and each study's recommendation history.
//
// Layout (every key a bucket unless it names a record):
//
//	meta/layout                       layout version
//	studies/<name>/study              Study: name, spec snapshot and hash
//	studies/<name>/runs/<id>/run      Run
//	studies/<name>/runs/<id>/trials/<seq>  Trial
//	studies/<name>/recommendations/<seq>   Recommendation
//
// Run IDs, trial and recommendation sequence numbers come from bbolt's
// NextSequence and are written as 8-byte big-endian keys, so cursor order
// is creation order. Every value is JSON that starts with its record
// version ("schema"); a file or record newer than this batchtune is
// refused with ErrSchemaTooNew rather than half-read.
//
// Data flows in as the tuner works: PutStudy when a study starts, CreateRun,
// then AddTrial and PutTrial each time a trial changes state, each in its
// own synced transaction, so a crash loses at most the state change in
// flight and never a finished trial. ResumeRun finds a run left unfinished
// by a stopped process, marks its unfinished trials interrupted and hands
// back the run's history, so the tuner redoes only those.
//
// Locking: a writing DB holds PATH.lock (flock) from Open to Close and
// records itself there (pid, host, command, since); a second writer gets,
// after a bounded wait, an *InUseError naming it, and a record left by a
// dead process is not believed. The bbolt file is opened only for the
// length of each transaction, so read-only DBs of other processes read
// between a writer's transactions rather than waiting for it to exit.
package store
