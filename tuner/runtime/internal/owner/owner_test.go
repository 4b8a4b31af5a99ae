package owner

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	alive := func(pid int) bool { return pid == 7 }
	for _, c := range []struct {
		label      string
		gone       bool
		remote     bool
		describing string
	}{
		{"", true, false, ""},
		{"42@here", true, false, ""}, // this process
		{"garbage", true, false, ""},
		{"-3@here", true, false, ""},
		{"7@here", false, false, "pid 7 on host here"},
		{"8@here", true, false, ""},
		{"7@there", false, true, "pid 7 on host there (not checked from here)"},
	} {
		v := Check(c.label, "42@here", "here", alive)
		if v.Gone != c.gone || v.Remote != c.remote || v.String() != c.describing {
			t.Errorf("Check(%q) = %+v %q; want gone %v remote %v %q", c.label, v, v.String(), c.gone, c.remote, c.describing)
		}
	}
}

func TestSelfAndPIDAlive(t *testing.T) {
	label, host := Self()
	if !strings.HasPrefix(label, strconv.Itoa(os.Getpid())+"@") || !strings.HasSuffix(label, "@"+host) {
		t.Errorf("Self() = %q, %q", label, host)
	}
	if !PIDAlive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	if PIDAlive(1 << 30) {
		t.Error("pid 2^30 is alive")
	}
}
