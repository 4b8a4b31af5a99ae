// Command batchtune tunes TensorFlow Serving's dynamic batching by
// experiment. Each subcommand lives in its own file; this file wires them
// into one urfave/cli application and owns signal handling.
//
// Signals: the first SIGINT or SIGTERM asks for a graceful stop (a tuning
// run finishes its current trial, restores the server and exits; other
// commands stop at once); the second aborts the current trial, still
// restoring the server; the third exits immediately.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

func main() {
	os.Exit(run(os.Args))
}

// interrupts are the two levels of stopping a command can honour.
type interrupts struct {
	// graceful is closed by the first signal.
	graceful <-chan struct{}
	// abort is cancelled by the second signal.
	abort context.Context
}

// interruptsKey finds the interrupts in the app's metadata.
const interruptsKey = "interrupts"

func run(args []string) int {
	abort, cancelAbort := context.WithCancel(context.Background())
	defer cancelAbort()
	// Commands that do not drain stop at the first signal.
	first, cancelFirst := context.WithCancel(abort)
	defer cancelFirst()
	graceful := make(chan struct{})

	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		n := 0
		for sig := range sigs {
			n++
			switch n {
			case 1:
				if stopAtOnce.Load() {
					fmt.Fprintf(os.Stderr, "\nbatchtune: %v: stopped\n", sig)
					os.Exit(signalStatus(sig))
				}
				fmt.Fprintf(os.Stderr, "\nbatchtune: %v: stopping after the current step (again to abort it)\n", sig)
				close(graceful)
				cancelFirst()
			case 2:
				fmt.Fprintf(os.Stderr, "\nbatchtune: %v: aborting; restoring the server (again to exit at once)\n", sig)
				cancelAbort()
			default:
				os.Exit(exitInterrupted)
			}
		}
	}()

	app := &cli.App{
		Name:  "batchtune",
		Usage: "auto-tune TensorFlow Serving's dynamic batching",
		Commands: []*cli.Command{
			// One line per subcommand file.
			tuneCommand(),
			trialsCommand(),
			exportCommand(),
			validateCommand(),
			probeCommand(),
			daemonCommand(),
			statusCommand(),
			reportCommand(),
			cleanupCommand(),
			runsCommand(),
			verifyCommand(),
			planCommand(),
		},
		Version:  appVersion(),
		Metadata: map[string]any{interruptsKey: interrupts{graceful: graceful, abort: abort}},
		// help and help COMMAND answer; a mistyped command gets a
		// suggestion.
		Suggest: true,
		// Exit statuses are run's to choose (exit.go), not urfave's.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	markUsageErrors(app)
	moveDefaultsToDefaultText(app)
	markStopAtOnce(app, "validate", "trials", "status", "export", "runs", "plan")
	if err := app.RunContext(first, args); err != nil {
		fmt.Fprintln(os.Stderr, "batchtune:", err)
		return exitStatus(err)
	}
	return exitOK
}

// interruptsOf returns the app's two-level interrupts, for commands that
// drain gracefully (tune, daemon).
func interruptsOf(c *cli.Context) interrupts {
	return c.App.Metadata[interruptsKey].(interrupts)
}
