// Package tuner runs a study: the one-shot tuning loop that finds a TF
// Serving model's best batching configuration by experiment, and the
// confirmation that makes the recommendation trustworthy.
//
// Data flows one way through a run:
//
//	search.Strategy.Suggest(space, history)        what to try next
//	  → search.Space.Check                         hard rules (SLO/3, TF's own): rejected, never run
//	  → runtime.Runtime.Start(batching.config)     a fresh server per trial
//	  → Prober.Trial: ready → warm up → measure    probe, against the real server
//	  → score                                      objective and SLO verdict
//	  → store.DB.PutTrial                          at every state change
//
// and, once the search stops, confirmation: the top candidates (in the
// strategy's ranking, search.Rank, which for the Bayesian strategy reads
// each measurement against its neighbours) and the baseline are re-measured on fresh restarts, interleaved, and the winner is
// chosen by a conservative estimate (the lower confidence bound of its
// objective, the upper one for latency), never by its luckiest trial. The
// recommendation states the gain over the baseline with a confidence
// interval and why the winner wins (batch size reached, queueing share), and
// is exported as a batching.config written atomically.
//
// The store is the source of truth: the tuner keeps no state a crash could
// lose. Rerunning a study resumes its unfinished run; trials that finished
// are not redone, one that was interrupted is.
package tuner
