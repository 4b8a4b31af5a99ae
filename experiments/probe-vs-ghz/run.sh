#!/usr/bin/env bash
# probe-vs-ghz: batchtune probe against ghz (the gRPC load tester) on one
# TF Serving stand-in, at the same concurrency and connections, several
# rounds interleaved; then the open-loop rate accuracy check.
#
#   experiments/probe-vs-ghz/run.sh [compare flags...]   e.g. --rounds 7 --duration 20s
#
# Installs ghz v0.93.0 with `go install` into experiments/probe-vs-ghz/bin,
# builds batchtune and tfs-emulator there, and runs the compare driver once
# per model, which prints the figures (raw JSON of every run goes to out/).
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$here/bin"
mkdir -p "$bin"

if [ ! -x "$bin/ghz" ]; then
  echo "installing ghz v0.93.0 into $bin" >&2
  # ghz is its own module with its own dependencies: install it outside
  # batchtune's go.mod.
  (cd "$bin" && GOBIN="$bin" GOFLAGS=-mod=mod go install github.com/bojand/ghz/cmd/ghz@v0.93.0)
fi
(cd "$root" && go build -o "$bin/batchtune" ./cmd/batchtune && go build -o "$bin/tfs-emulator" ./cmd/tfs-emulator \
  && go build -o "$bin/compare" ./experiments/probe-vs-ghz/compare)

common=(--ghz "$bin/ghz" --batchtune "$bin/batchtune" --emulator "$bin/tfs-emulator" --root "$root")
# 1. The bundled ranker: a realistic model whose modelled device bounds
#    throughput, so QPS says as much about the stand-in as about the client.
"$bin/compare" "${common[@]}" --model ranker --out "$here/out/ranker" "$@"
echo
# 2. A near-free model with the same signature: the server costs little
#    more than its gRPC handling, so the clients' own efficiency shows.
"$bin/compare" "${common[@]}" --model null --model-base "$here/models/null" --out "$here/out/null" "$@"
