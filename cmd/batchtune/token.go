package main

import (
	"fmt"
	"os"
)

// tokenFileWarning says when the token file can be read by every user of
// the machine ("" when it cannot, or there is none): anyone who reads it
// can start and cancel runs.
func tokenFileWarning(file string) string {
	if file == "" {
		return ""
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return ""
	}
	return fmt.Sprintf("the token file %s is readable by every user (mode %04o): anyone on this machine can start and cancel runs; chmod 600 it", file, fi.Mode().Perm())
}
