package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/batchtune/batchtune/probe"
)

// checkListening dials the probe's target once: a refused connection
// means nothing listens there, which waiting will not change unless a
// server is starting (then --ready-timeout says how long to wait).
func checkListening(ctx context.Context, t probe.Target, rest bool) error {
	addr, flag := t.Addr, "--target"
	if rest {
		addr, flag = t.RESTAddr, "--rest"
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("probe: nothing listens on %s (%s): is TF Serving running there? To wait for one that is starting, give --ready-timeout", addr, flag)
	}
	return nil // let the readiness wait report other failures
}
