// Package statedir is a runtime's footing on disk: the per-study directory
// under a state dir that holds the trial files a server reads, the records a
// later batchtune needs to clean up after one that was killed, and the lock
// that keeps two live batchtunes off the same study.
package statedir
