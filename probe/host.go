package probe

// HostSample is one reading of the machine's CPU counters and load.
type HostSample struct {
	// TotalTicks and StealTicks are the machine's CPU time since boot, all
	// of it and the part stolen by a hypervisor, in clock ticks; valid
	// when CPUOK.
	TotalTicks, StealTicks uint64
	CPUOK                  bool
	// Load1 is the one-minute load average; valid when LoadOK.
	Load1  float64
	LoadOK bool
}

// StealSince returns the share of CPU time stolen between an earlier
// sample and s, and whether both samples could say.
func (s HostSample) StealSince(earlier HostSample) (float64, bool) {
	if !s.CPUOK || !earlier.CPUOK || s.TotalTicks <= earlier.TotalTicks || s.StealTicks < earlier.StealTicks {
		return 0, false
	}
	return float64(s.StealTicks-earlier.StealTicks) / float64(s.TotalTicks-earlier.TotalTicks), true
}
