package tuner

import "fmt"

// exportFailed says what failed and how to recover: the recommendation is
// kept in the store (not accepted), and export -o writes it elsewhere.
func exportFailed(err error, study string, run uint64) error {
	return fmt.Errorf("export: %w; the recommendation is kept in the store, not accepted: write it with `batchtune export --study %s --run %d -o FILE`", err, study, run)
}

// MaxStoredSpec bounds the study text kept in the store: the file is
// kept whole up to this size, else its start and a note (the spec hash
// still identifies the whole file).
const MaxStoredSpec = 64 << 10

func storedSpec(src []byte) string {
	if len(src) <= MaxStoredSpec {
		return string(src)
	}
	return string(src[:MaxStoredSpec]) + fmt.Sprintf("\n# ... cut by batchtune: the study file is %d bytes; the store keeps the first %d\n", len(src), MaxStoredSpec)
}
