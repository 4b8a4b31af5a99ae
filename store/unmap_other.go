//go:build !linux

package store

import "os"

// unmapFile is a no-op where /proc/self/maps does not exist; a panic in
// bolt.Open may then keep the file locked until the process exits.
func unmapFile(*os.File) {}
