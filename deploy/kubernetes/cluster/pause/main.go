// Command pause is the pod sandbox ("pause") process of the test cluster
// that deploy/kubernetes/cluster/up.sh brings up: with no registry to pull
// the usual pause image from, up.sh builds this into a FROM scratch image.
// It holds the pod's namespaces, reaps the children it inherits as PID 1,
// and exits on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
