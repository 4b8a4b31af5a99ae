#!/usr/bin/env bash
# Per-trial overhead (restart + ready + warmup) on the process runtime.
# Usage: experiments/trial-overhead/run.sh   (from anywhere; builds first)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
make -s build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model load time (configs/models/ranker/1/model.json): $(grep -o '"load_time_ms": [0-9]*' configs/models/ranker/1/model.json)"
BATCHTUNE_HOME=$work bin/batchtune tune --config "$here/study.yaml" --db "$work/bt.db" >/dev/null 2>"$work/log" || { tail -20 "$work/log"; exit 1; }
BATCHTUNE_HOME=$work bin/batchtune trials --db "$work/bt.db"
