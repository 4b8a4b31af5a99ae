package tuner

import (
	"strings"

	"github.com/batchtune/batchtune/internal/atomicfile"
	"github.com/batchtune/batchtune/store"
)

// export writes the recommendation's batching.config (and flags, when the
// study asks) to the study's export paths, atomically.
func (t *Tuner) export(rec *store.Recommendation) ([]string, error) {
	var written []string
	e := t.study.Export
	if e.Path != "" {
		if err := atomicfile.Write(e.Path, []byte(rec.Batching), 0o644); err != nil {
			return written, err
		}
		written = append(written, e.Path)
	}
	if e.FlagsPath != "" {
		if err := atomicfile.Write(e.FlagsPath, []byte(strings.Join(rec.Flags, "\n")+"\n"), 0o644); err != nil {
			return written, err
		}
		written = append(written, e.FlagsPath)
	}
	return written, nil
}
