package main

import (
	"fmt"
	"io"
	goruntime "runtime"

	"github.com/batchtune/batchtune/configs"
)

// printStudyWarnings prints what is allowed in the study at path but
// probably not meant, on this machine.
func printStudyWarnings(w io.Writer, path string) {
	s, err := configs.LoadStudy(path)
	if err != nil {
		return
	}
	warnings := configs.ThreadWarnings(s, goruntime.NumCPU())
	if w := configs.SLOTimeoutWarning(s); w != "" {
		warnings = append(warnings, w)
	}
	for _, msg := range warnings {
		fmt.Fprintf(w, "%s: warning: %s\n", path, msg)
	}
}
