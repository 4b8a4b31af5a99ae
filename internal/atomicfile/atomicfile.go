package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data, with permissions perm. It writes a
// temporary file in path's directory, syncs it, renames it over path and
// syncs the directory, so that a reader sees the old file or the whole new
// one, never a part. The temporary file is removed on failure. Errors
// name path: "write <path>: <cause>".
func Write(path string, data []byte, perm os.FileMode) error {
	if err := write(path, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
