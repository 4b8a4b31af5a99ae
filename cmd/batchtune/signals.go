package main

import (
	"os"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/urfave/cli/v2"
)

// stopAtOnce is set while a command runs that has nothing to finish or
// restore (validate, trials, status, export): the first SIGINT or SIGTERM
// then ends the process at once, wherever the command is (issue 15:
// validate caught SIGTERM and went on reading).
var stopAtOnce atomic.Bool

// markStopAtOnce wraps the named commands' actions to set stopAtOnce.
func markStopAtOnce(app *cli.App, names ...string) {
	for _, c := range app.Commands {
		if !slices.Contains(names, c.Name) || c.Action == nil {
			continue
		}
		action := c.Action
		c.Action = func(ctx *cli.Context) error {
			stopAtOnce.Store(true)
			if testHookBeforeAction != nil {
				testHookBeforeAction()
			}
			return action(ctx)
		}
	}
}

// testHookBeforeAction, when set (by the tests' child process), runs
// before a stop-at-once command's action.
var testHookBeforeAction func()

// signalStatus is the conventional exit status after a signal: 128+n.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}
