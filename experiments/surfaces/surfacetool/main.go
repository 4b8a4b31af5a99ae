// Command surfacetool is the experiments/surfaces toolkit: it calibrates
// the virtual-time simulation of the stand-in (emulator/sim) on this
// machine, measures the real stand-in with the project's probe, validates
// the simulation against those measurements, and records performance
// surfaces in the batchtune-surface/2 format (search/replay).
//
//	surfacetool host     -model DIR -o FILE            host work of the device model (real runs)
//	surfacetool real     -plan FILE -o FILE             real stand-in runs, measured by the probe
//	surfacetool fit      -cal FILE -real FILE...        fit serving costs and noise into a calibration
//	surfacetool validate -cal FILE -real FILE           simulate the real runs and compare
//	surfacetool surface  -spec FILE -cal FILE -o FILE   simulate every configuration of a space
//	                                                    (a max_capacity spec: a capacity search per run)
//	surfacetool refine   -spec FILE -surface FILE       reference runs for a surface's contenders
//	surfacetool capcheck -spec FILE                     capacity search against a sweep of 20 rates
//
// Every subcommand prints what it did on stdout; run.sh in the parent
// directory holds the exact commands that produced the recorded files.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process
	}()
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: surfacetool host|real|fit|validate|surface|refine|capcheck [flags]")
		return 2
	}
	var err error
	switch args[0] {
	case "host":
		err = hostCmd(ctx, args[1:])
	case "real":
		err = realCmd(ctx, args[1:])
	case "fit":
		err = fitCmd(ctx, args[1:])
	case "validate":
		err = validateCmd(ctx, args[1:])
	case "refine":
		err = refineCmd(ctx, args[1:])
	case "surface":
		err = surfaceCmd(ctx, args[1:])
	case "capcheck":
		err = capcheckCmd(ctx, args[1:])
	default:
		fmt.Fprintf(os.Stderr, "surfacetool: unknown subcommand %q\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "surfacetool:", err)
		return 1
	}
	return 0
}
