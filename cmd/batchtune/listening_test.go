package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestProbeClosedPortFailsFast: issue 15's probe against a closed port
// waited a minute in silence.
func TestProbeClosedPortFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, _, err = runProbeCmd(t, "--target", addr, "--model", "m")
	if err == nil || !strings.Contains(err.Error(), "nothing listens on "+addr) {
		t.Fatalf("probe of a closed port: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to fail", d)
	}
}
