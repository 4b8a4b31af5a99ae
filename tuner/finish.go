package tuner

import "fmt"

// exportFailed says what failed and how to recover: the recommendation is
// kept in the store (not accepted), and export -o writes it elsewhere.
func exportFailed(err error, study string, run uint64) error {
	return fmt.Errorf("export: %w; the recommendation is kept in the store, not accepted: write it with `batchtune export --study %s --run %d -o FILE`", err, study, run)
}
