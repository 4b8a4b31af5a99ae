// Package owner names the batchtune process that made a trial's server
// (a container, a pod) and says whether that process is gone, so that a
// runtime collects what a killed batchtune left and never touches what a
// live one is measuring.
package owner

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Self returns this process's owner label, pid@host, and the host name.
func Self() (label, host string) {
	host, _ = os.Hostname()
	return strconv.Itoa(os.Getpid()) + "@" + host, host
}

// Verdict is what Check found about an owner label.
type Verdict struct {
	// Gone is true when the owner's objects may be removed: no label (an
	// older batchtune), this process's own label, a malformed one, or a
	// pid on this host that no longer runs.
	Gone bool
	// PID and Host name the live owner when Gone is false; Remote is true
	// when it is on another host and so could not be checked from here
	// (it counts as live).
	PID    int
	Host   string
	Remote bool
	// Pod (namespace/name) names a live owner pod (CheckAny); Unchecked,
	// when set, says why it could not be looked up (it counts as live).
	Pod       string
	Unchecked string
}

// String describes a live owner ("pid 42 on host a", with "(not checked
// from here)" when it is remote; "pod ns/name", with "(not checked: why)"
// when its lookup failed); "" when Gone.
func (v Verdict) String() string {
	switch {
	case v.Gone:
		return ""
	case v.Pod != "":
		return v.podString()
	case v.Remote:
		return fmt.Sprintf("pid %d on host %s (not checked from here)", v.PID, v.Host)
	}
	return fmt.Sprintf("pid %d on host %s", v.PID, v.Host)
}

// Check reads label (pid@host) as seen from self (this process's label)
// on host; alive reports whether a local pid runs (PIDAlive in
// production, a fake in tests).
func Check(label, self, host string, alive func(pid int) bool) Verdict {
	if label == "" || label == self {
		return Verdict{Gone: true}
	}
	pidText, ownerHost, ok := strings.Cut(label, "@")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return Verdict{Gone: true}
	}
	if ownerHost != host {
		return Verdict{PID: pid, Host: ownerHost, Remote: true}
	}
	if alive(pid) {
		return Verdict{PID: pid, Host: ownerHost}
	}
	return Verdict{Gone: true}
}

// PIDAlive reports whether pid runs on this machine.
func PIDAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
