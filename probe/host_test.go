package probe

import (
	"math"
	"runtime"
	"testing"
)

// TestReadHost: on Linux both readings come back and are sane.
func TestReadHost(t *testing.T) {
	s := ReadHost()
	if runtime.GOOS != "linux" {
		if s.CPUOK || s.LoadOK {
			t.Fatalf("off Linux the sample claims readings: %+v", s)
		}
		return
	}
	if !s.CPUOK || !s.LoadOK || s.TotalTicks == 0 || s.StealTicks > s.TotalTicks || s.Load1 < 0 {
		t.Fatalf("sample %+v: want CPU counters and a load average", s)
	}
}

func TestStealSince(t *testing.T) {
	a := HostSample{TotalTicks: 1000, StealTicks: 10, CPUOK: true}
	b := HostSample{TotalTicks: 3000, StealTicks: 210, CPUOK: true}
	if got, ok := b.StealSince(a); !ok || math.Abs(got-0.1) > 1e-12 {
		t.Errorf("200 of 2000 ticks stolen: %v %v, want 0.1", got, ok)
	}
	if _, ok := a.StealSince(b); ok {
		t.Error("counters that went backwards gave a share")
	}
	if _, ok := b.StealSince(HostSample{}); ok {
		t.Error("an unreadable earlier sample gave a share")
	}
}
