//go:build !unix

package sim

import "time"

// processCPU is unavailable off unix: MeasureHost then fails.
func processCPU() (time.Duration, bool) { return 0, false }
