package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/batchtune/batchtune/configs"
)

// checkExportWritable tries to create a file beside each export path, so
// that a path that cannot be written (/proc/..., a read-only mount, a
// missing folder) fails before the run, not after it.
func checkExportWritable(s *configs.Study) error {
	for _, e := range []struct{ field, path string }{{"export.path", s.Export.Path}, {"export.flags_path", s.Export.FlagsPath}} {
		if e.path == "" {
			continue
		}
		dir := filepath.Dir(e.path)
		f, err := os.CreateTemp(dir, ".batchtune-check-*")
		if err != nil {
			return fmt.Errorf("%s: %s cannot be written (%v); fix the folder or change %s in %s. Nothing ran. "+
				"(A stored recommendation can be written anywhere with `batchtune export -o FILE`.)", e.field, e.path, err, e.field, s.File)
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}
