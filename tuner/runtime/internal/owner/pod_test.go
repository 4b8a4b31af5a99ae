package owner

import (
	"errors"
	"testing"
	"time"
)

func TestCheckAnyPod(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	states := map[string]PodState{
		"live":      {Exists: true, UID: "u1", Phase: "Running"},
		"pending":   {Exists: true, UID: "u1", Phase: "Pending"},
		"succeeded": {Exists: true, UID: "u1", Phase: "Succeeded"},
		"failed":    {Exists: true, UID: "u1", Phase: "Failed"},
		"other":     {Exists: true, UID: "u2", Phase: "Running"},                                 // the name's new pod
		"stopping":  {Exists: true, UID: "u1", Phase: "Running", DeleteBy: now.Add(time.Minute)}, // within its grace
		"overdue":   {Exists: true, UID: "u1", Phase: "Running", DeleteBy: now.Add(-time.Second)},
	}
	var asked []string
	lookup := func(ns, name string) (PodState, error) {
		asked = append(asked, ns+"/"+name)
		if name == "forbidden" {
			return PodState{}, errors.New("pods is forbidden")
		}
		return states[name], nil // a missing name: Exists false
	}
	alive := func(pid int) bool { return pid == 7 }
	self := Pod{"ns", "me", "u0"}.Label()
	for _, c := range []struct {
		label, want string
		gone        bool
	}{
		{Pod{"ns", "live", "u1"}.Label(), "pod ns/live", false},
		{Pod{"other-ns", "pending", "u1"}.Label(), "pod other-ns/pending", false},
		{Pod{"ns", "stopping", "u1"}.Label(), "pod ns/stopping", false},
		{Pod{"ns", "forbidden", "u1"}.Label(), "pod ns/forbidden (not checked: pods is forbidden)", false},
		{Pod{"ns", "succeeded", "u1"}.Label(), "", true},
		{Pod{"ns", "failed", "u1"}.Label(), "", true},
		{Pod{"ns", "missing", "u1"}.Label(), "", true},
		{Pod{"ns", "other", "u1"}.Label(), "", true},
		{Pod{"ns", "overdue", "u1"}.Label(), "", true},
		{self, "", true},
		{"pod/ns/live", "", true}, // malformed: read as pid@host, and so gone
		{"7@here", "pid 7 on host here", false},
		{"8@here", "", true},
		{"7@there", "pid 7 on host there (not checked from here)", false},
	} {
		v := CheckAny(c.label, self, "here", alive, lookup, now)
		if v.Gone != c.gone || v.String() != c.want {
			t.Errorf("CheckAny(%q) = %+v %q; want gone %v %q", c.label, v, v.String(), c.gone, c.want)
		}
	}
	for _, a := range asked {
		if a == "ns/me" {
			t.Error("looked up its own pod")
		}
	}
	if len(asked) != 9 {
		t.Errorf("lookups %v; want one per pod label but its own", asked)
	}
}

func TestSelfPodAndParse(t *testing.T) {
	t.Setenv(EnvPodName, "batchtune-tune-x7")
	t.Setenv(EnvPodNamespace, "tuning")
	t.Setenv(EnvPodUID, "0b6a2bbd-2d0e-4a4e-9d55-7c8a6b1f3c11")
	p, ok := SelfPod()
	if !ok || p != (Pod{"tuning", "batchtune-tune-x7", "0b6a2bbd-2d0e-4a4e-9d55-7c8a6b1f3c11"}) {
		t.Fatalf("SelfPod() = %+v, %v", p, ok)
	}
	back, ok := ParsePod(p.Label())
	if !ok || back != p {
		t.Errorf("ParsePod(%q) = %+v, %v", p.Label(), back, ok)
	}
	t.Setenv(EnvPodUID, "")
	if p, ok := SelfPod(); ok {
		t.Errorf("SelfPod() without a UID = %+v, true", p)
	}
	for _, bad := range []string{"", "42@host", "pod/", "pod/a/b", "pod/a/b/c/d", "pod//b/c"} {
		if p, ok := ParsePod(bad); ok {
			t.Errorf("ParsePod(%q) = %+v, true", bad, p)
		}
	}
}
