package tuner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchtune/batchtune/store"
)

// export writes the recommendation's batching.config (and flags, when the
// study asks) to the study's export paths, atomically.
func (t *Tuner) export(rec *store.Recommendation) ([]string, error) {
	var written []string
	e := t.study.Export
	if e.Path != "" {
		if err := WriteFileAtomic(e.Path, []byte(rec.Batching)); err != nil {
			return written, err
		}
		written = append(written, e.Path)
	}
	if e.FlagsPath != "" {
		if err := WriteFileAtomic(e.FlagsPath, []byte(strings.Join(rec.Flags, "\n")+"\n")); err != nil {
			return written, err
		}
		written = append(written, e.FlagsPath)
	}
	return written, nil
}

// WriteFileAtomic writes data to path so that a reader sees either the old
// file or the whole new one, never a part: a temporary file in the same
// directory, synced, then renamed over path, then the directory synced.
func WriteFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
