#!/usr/bin/env bash
# Per-trial overhead (restart + ready + warmup) on the process runtime, for
# the stand-in's two bundled models. Usage: experiments/trial-overhead/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
make -s build
work=$(mktemp -d)
trap 'rm -rf "$work"; rm -f "$here"/*.batching.config' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for study in study.yaml study-mlp.yaml; do
  model=$(sed -n 's#.*base_path: ../../configs/models/\([a-z]*\)}.*#\1#p' "$here/$study")
  echo
  echo "## $study: model $model, $(grep -o '"load_time_ms": [0-9]*' configs/models/$model/1/model.json)"
  BATCHTUNE_HOME=$work bin/batchtune tune -v --config "$here/$study" --db "$work/$model.db" 2>"$work/$model.log" >/dev/null || { tail -20 "$work/$model.log"; exit 1; }
  BATCHTUNE_HOME=$work bin/batchtune trials --db "$work/$model.db" | grep "setup per trial"
  # The split: wait for AVAILABLE (the model's load included) and warmup.
  grep 'server ready and warm' "$work/$model.log" | sed -E 's/.* ready=([^ ]+) warmup=([^ ]+) .*/\1 \2/' |
    awk '{ r=$1; w=$2; sub(/ms$/,"e-3",r); sub(/s$/,"",r); sub(/ms$/,"e-3",w); sub(/s$/,"",w); R+=r; W+=w; n++ }
         END { printf "ready (start to AVAILABLE): mean %.2fs; warmup: mean %.2fs; over %d trials\n", R/n, W/n, n }'
done
