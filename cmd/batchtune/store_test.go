package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestReadOnlyCommandsOnABadStore: status, trials and export on an empty
// or garbage file say what it is and what to do, print no panic, and
// leave nothing beside it (no .lock file).
func TestReadOnlyCommandsOnABadStore(t *testing.T) {
	garbage := bytes.Repeat([]byte("not a store "), 2000)
	for _, f := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a batchtune store: "},
		{"garbage", garbage, "is not a bbolt file"},
	} {
		for _, cmd := range []string{"status", "trials", "export"} {
			dir := t.TempDir()
			path := filepath.Join(dir, "batchtune.db")
			if err := os.WriteFile(path, f.data, 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errw bytes.Buffer
			app := &cli.App{Name: "batchtune", Commands: []*cli.Command{statusCommand(), trialsCommand(), exportCommand()}, Writer: &out, ErrWriter: &errw}
			err := app.RunContext(context.Background(), []string{"batchtune", cmd, "--db", path})
			if err == nil || !strings.Contains(err.Error(), f.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("%s on an %s store: %v, want %q naming the file", cmd, f.name, err, f.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%s on an %s store left %d files in its folder, want only the store", cmd, f.name, len(entries))
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, f.data) {
				t.Errorf("%s changed the %s store", cmd, f.name)
			}
		}
	}
}
