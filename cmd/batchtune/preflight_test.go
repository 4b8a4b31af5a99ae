package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/configs"
)

// TestExportPathCheckedBeforeRunning: issue 15's /proc export path failed
// only after the whole run.
func TestExportPathCheckedBeforeRunning(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{filepath.Join(dir, "batching.config"), true},
		{"/proc/batchtune/batching.config", false},
		{filepath.Join(dir, "missing", "batching.config"), false},
	} {
		s := &configs.Study{File: "s.yaml"}
		s.Export.Path = tc.path
		err := checkExportWritable(s)
		if (err == nil) != tc.ok || (err != nil && (!strings.Contains(err.Error(), "export.path: "+tc.path) || !strings.Contains(err.Error(), "export -o"))) {
			t.Errorf("%s: %v, want ok %v", tc.path, err, tc.ok)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check left files: %v", entries)
	}
}
