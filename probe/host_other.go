//go:build !linux

package probe

// ReadHost cannot read the machine's CPU counters or load off Linux: the
// sample says so (CPUOK and LoadOK false).
func ReadHost() HostSample { return HostSample{} }
