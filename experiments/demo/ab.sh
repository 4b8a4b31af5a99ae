#!/usr/bin/env bash
# Two batchtune binaries on the demo, side by side: for each seed, both
# run `tune --seed K --json` with a fresh store, in turn (A first on odd
# seeds, B first on even ones, so that neither always follows the other
# on a machine whose load drifts).
#
#   experiments/demo/ab.sh BIN_A BIN_B OUTDIR [FIRST [LAST]]   (default 1 10)
#
# STUDY=FILE in the environment runs that study instead of the embedded
# demo (--config FILE).
#
# Build the binaries first, e.g. the commit before a change into one
# directory and after it into another (go build -o DIR/batchtune
# ./cmd/batchtune in each checkout); the script builds bin/tfs-emulator,
# the stand-in both measure. Writes OUTDIR/{a,b}/seed-K.{json,log} and prints one line per
# run (experiments/demo/summarize.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
a=$1 b=$2 out=$3
first=${4:-1}
last=${5:-10}
export PATH=$PATH:/usr/local/go/bin
make -s build
mkdir -p "$out/a" "$out/b"
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); A=$a B=$b study=${STUDY:-the embedded demo}"
one() { # label binary dir seed
  local home start end
  home=$(mktemp -d)
  start=$(date +%s)
  BATCHTUNE_HOME=$home "$2" tune ${STUDY:+--config "$STUDY"} --seed "$4" --json >"$3/seed-$4.json" 2>"$3/seed-$4.log" || true
  end=$(date +%s)
  rm -rf "$home"
  python3 experiments/demo/summarize.py "$3/seed-$4.json" "$1 seed $4" "$((end - start))"
}
for k in $(seq "$first" "$last"); do
  if ((k % 2)); then
    one A "$a" "$out/a" "$k"; one B "$b" "$out/b" "$k"
  else
    one B "$b" "$out/b" "$k"; one A "$a" "$out/a" "$k"
  fi
done
