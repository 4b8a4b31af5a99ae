//go:build !unix

package probe

import "time"

// ProcessCPU is unavailable off unix; the probe's CPU guard is then
// skipped and says so.
func ProcessCPU() (time.Duration, bool) { return 0, false }
