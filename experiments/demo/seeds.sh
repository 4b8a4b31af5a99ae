#!/usr/bin/env bash
# The demo, reproduced: `make demo`'s tuning run with search.seed 1..N, each
# with a fresh store, and what each recommended.
#
#   experiments/demo/seeds.sh [FIRST [LAST]]     (default 1 10)
#
# Writes experiments/demo/seeds/seed-K.json (the run's report, tune --json)
# and prints one line per seed: the recommended configuration, its
# confirmed throughput and interval, the run's wall time. Run it on a quiet
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
  python3 - "$out/seed-$k.json" "$k" "$((end - start))" <<'PY'
import json, sys
path, seed, wall = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"seed {seed}: no report ({e}); see {path[:-5]}.log"); sys.exit(0)
rec = r.get("recommendation")
conf = r.get("confirmation") or {}
if not rec:
    print(f"seed {seed}: no recommendation ({conf.get('note', '')}); {wall} s"); sys.exit(0)
cfg = ",".join(f"{p['name']}={p['value']}" for p in rec["config"])
w = conf["candidates"][conf["winner"]]
e = w["estimate"]
print(f"seed {seed}: {cfg}: {e['mean']:.0f} req/s [{e['low']:.0f}, {e['high']:.0f}] over {w['repeats']} repeats; {len(r['trials'])} trials, {wall} s")
PY
done
