package ports

import (
	"fmt"
	"net"
	"strconv"

	"github.com/batchtune/batchtune/tuner/runtime"
)

// Free returns n distinct ports the kernel considers free on host (all
// interfaces when host is ""). Another process may take one before the
// server binds it; the server then fails to start and says so in its log.
func Free(host string, n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		// Every listener stays open until all are chosen, so the kernel
		// cannot hand out the same port twice.
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("runtime: choosing a free port on %q: %w", host, err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Check returns an error wrapping runtime.ErrPortInUse, naming what the
// port is for, when port cannot be bound on host.
func Check(host string, port int, what string) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: %s port %s: %v", runtime.ErrPortInUse, what, addr, err)
	}
	return l.Close()
}
