#!/usr/bin/env bash
# The demo, reproduced: `make demo`'s tuning run with search.seed 1..N, each
# with a fresh store, and what each recommended.
#
#   experiments/demo/seeds.sh [FIRST [LAST]]     (default 1 10)
#
# Writes experiments/demo/seeds/seed-K.json (the run's report, tune --json)
# and prints one line per seed: the recommended configuration, its
# confirmed throughput and interval, the run's wall time and its phases
# (experiments/demo/summarize.py). Run it on a quiet
# machine: every trial measures a real stand-in on this machine's cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH=$PATH:/usr/local/go/bin
first=${1:-1}
last=${2:-10}
make -s build
out=experiments/demo/seeds
mkdir -p "$out"
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); bin/batchtune tune --seed K --json (fresh BATCHTUNE_HOME each)"
for k in $(seq "$first" "$last"); do
  home=$(mktemp -d)
  start=$(date +%s)
  BATCHTUNE_HOME=$home bin/batchtune tune --seed "$k" --json >"$out/seed-$k.json" 2>"$out/seed-$k.log" || true
  end=$(date +%s)
  rm -rf "$home"
  python3 experiments/demo/summarize.py "$out/seed-$k.json" "seed $k" "$((end - start))"
done
