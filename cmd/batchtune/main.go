// Command batchtune tunes TensorFlow Serving's dynamic batching by
// experiment. Each subcommand lives in its own file; this file wires them
// into one urfave/cli application and owns signal handling: the first
// SIGINT/SIGTERM cancels the command's context (a graceful stop), the second
// exits at once.
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

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore default handling: a second signal kills the process
	}()

	app := &cli.App{
		Name:  "batchtune",
		Usage: "auto-tune TensorFlow Serving's dynamic batching",
		Commands: []*cli.Command{
			// One line per subcommand file.
			validateCommand(),
		},
		HideHelpCommand: true,
	}
	if err := app.RunContext(ctx, args); err != nil {
		fmt.Fprintln(os.Stderr, "batchtune:", err)
		return 1
	}
	return 0
}
