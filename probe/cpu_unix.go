//go:build unix

package probe

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time (user + system) this process has used,
// from getrusage(RUSAGE_SELF); false where it cannot be read. The probe
// uses it to tell a generator-bound measurement; emulator/sim and the
// experiments use it to price work.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
