// Package atomicfile writes files that a reader (another process, or a
// batchtune started after a crash) sees either whole or not at all: the
// exported batching.config, the daemon's record, a runtime's trial files,
// pid records and snapshots all go through Write.
package atomicfile
