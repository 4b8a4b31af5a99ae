//go:build !unix

package probe

import "time"

// processCPU is unavailable off unix; the CPU guard is then skipped and
// says so.
func processCPU() (time.Duration, bool) { return 0, false }
