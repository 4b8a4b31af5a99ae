// Command tfs-emulator is a stand-in for TensorFlow Serving's
// tensorflow_model_server: the same flags, the same gRPC and REST APIs, TF
// Serving's batch scheduling and Prometheus metrics, and a device model
// that makes batching a real trade-off (see emulator/).
//
// It is started exactly like tensorflow_model_server:
//
//	tfs-emulator --port=8500 --rest_api_port=8501 --model_name=ranker \
//	    --model_base_path=configs/models/ranker --enable_batching \
//	    --batching_parameters_file=batching.config
//
// As a container entrypoint (--docker_entrypoint, or when the binary is
// named tf_serving_entrypoint.sh) it behaves like TF Serving's image: it
// prepends --port=8500 --rest_api_port=8501 --model_name=${MODEL_NAME}
// --model_base_path=${MODEL_BASE_PATH}/${MODEL_NAME} to its arguments.
//
// Like TF, it prints unknown arguments and carries on, and when it cannot
// start it prints one "Failed to start server. Error: CODE: ..." line and
// exits with status 255. The first SIGINT/SIGTERM stops it gracefully, a
// second one at once.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/batchtune/batchtune/emulator"
)

// Version is what --version prints as the model server version.
const Version = "2.x-tfs-emulator"

func main() {
	os.Exit(run(os.Args, os.Getenv, os.Stdout, os.Stderr))
}

func run(argv []string, getenv func(string) string, stdout, stderr io.Writer) int {
	prog := filepath.Base(argv[0])
	args := argv[1:]
	entrypoint := prog == "tf_serving_entrypoint.sh"
	var rest []string
	for _, a := range args {
		if a == "--docker_entrypoint" {
			entrypoint = true
			continue
		}
		rest = append(rest, a)
	}
	args = rest
	if entrypoint {
		args = emulator.EntrypointArgs(getenv, args)
	}
	for _, a := range args {
		if a == "--help" || a == "-h" {
			fmt.Fprint(stdout, emulator.Usage(prog))
			return 0
		}
	}
	parsed, err := emulator.ParseArgs(args)
	if err != nil {
		fmt.Fprintln(stdout, strings.TrimPrefix(err.Error(), emulator.ErrConfig.Error()+": "))
		fmt.Fprint(stdout, emulator.Usage(prog))
		return 255
	}
	if parsed.Version {
		fmt.Fprintf(stdout, "TensorFlow ModelServer: %s\nTensorFlow Library: none (tfs-emulator is a stand-in)\n", Version)
		return 0
	}
	for _, u := range parsed.Unknown {
		fmt.Fprintf(stdout, "unknown argument: %s\n", u)
	}
	cfg := parsed.Config
	if cfg.ModelBasePath == "" {
		fmt.Fprint(stdout, emulator.Usage(prog))
		return 255
	}
	if len(parsed.RejectedOptions) > 0 {
		fmt.Fprintf(stdout, "Failed to start server. Error: UNIMPLEMENTED: --%s is not supported by tfs-emulator, which serves one model given by --model_name and --model_base_path\n",
			strings.Join(parsed.RejectedOptions, ", --"))
		return 255
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	for _, u := range parsed.Unsupported {
		log.Warn("flag accepted but not modelled by tfs-emulator", "flag", u)
	}
	cfg.Logger = log

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process
	}()

	srv, err := emulator.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stdout, "Failed to start server. Error: %v\n", err)
		return 255
	}
	if err := srv.Wait(); err != nil {
		fmt.Fprintf(stdout, "Server stopped. Error: %v\n", err)
		return 1
	}
	return 0
}
