//go:build linux

package probe

import (
	"os"
	"strconv"
	"strings"
)

// ReadHost samples the machine's CPU counters (/proc/stat) and load
// average (/proc/loadavg); OK is false where they cannot be read. Two
// samples give the share of CPU time stolen between them (HostSample.StealSince):
// a virtual machine's hypervisor running other guests on its CPUs, which
// widens every measurement taken meanwhile.
func ReadHost() HostSample {
	var s HostSample
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		f := strings.Fields(line)
		if len(f) >= 9 && f[0] == "cpu" {
			var sum uint64
			ok := true
			for i, v := range f[1:] {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					ok = false
					break
				}
				// guest and guest_nice (fields 9, 10) are already counted
				// in user and nice.
				if i < 8 {
					sum += n
				}
				if i == 7 {
					s.StealTicks = n
				}
			}
			if ok {
				s.TotalTicks, s.CPUOK = sum, true
			}
		}
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 1 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				s.Load1, s.LoadOK = v, true
			}
		}
	}
	return s
}
