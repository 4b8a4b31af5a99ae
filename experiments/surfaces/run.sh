#!/usr/bin/env bash
# surfaces: calibrate the virtual-time simulation of the stand-in
# (emulator/sim) on this machine, validate it against real stand-in runs
# measured by the probe, and record the performance surfaces the search
# benchmark replays (experiments/search-bench).
#
#   experiments/surfaces/run.sh host MODEL       host work of the model's real device code -> calibration/MODEL-host.json
#   experiments/surfaces/run.sh real PLAN        real stand-in runs of plans/PLAN.json -> real/PLAN.jsonl (appends)
#   experiments/surfaces/run.sh fit MODEL        serving costs and noise fitted to real/MODEL-calib.jsonl -> calibration/MODEL.json
#   experiments/surfaces/run.sh validate MODEL   simulation vs real/MODEL-valid.jsonl, a table of ratios
#   experiments/surfaces/run.sh surface NAME     every configuration of specs/NAME.json simulated -> NAME.jsonl
#                                                (a max_capacity spec: a capacity search per run)
#   experiments/surfaces/run.sh refine NAME      reference runs for NAME.jsonl's contenders, repeated until the best
#                                                and all within reach of it have them (the truth; never replayed)
#   experiments/surfaces/run.sh capcheck NAME    capacity search vs a sweep of 20 rates on 5 configurations
#   experiments/surfaces/run.sh all              the whole chain for ranker and mlp
#
# Measurements of the real stand-in (host, real) wait until the 1-minute
# load average is below QUIET (default 0.6) or WAIT seconds (default 1800)
# have passed, and print the load average they ran at.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH=$PATH:/usr/local/go/bin
dir=experiments/surfaces
QUIET=${QUIET:-0.6}
WAIT=${WAIT:-1800}

build() {
  go build -o bin/tfs-emulator ./cmd/tfs-emulator
  go build -o bin/surfacetool ./$dir/surfacetool
}

wait_quiet() {
  local waited=0
  while :; do
    local l
    l=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$l" -v q="$QUIET" 'BEGIN { exit !(l < q) }'; then
      break
    fi
    if [ "$waited" -ge "$WAIT" ]; then
      echo "# load average still $l after ${waited}s; measuring anyway" >&2
      break
    fi
    sleep 15
    waited=$((waited + 15))
  done
  echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

case "${1:-}" in
host)
  build
  wait_quiet
  echo "# bin/surfacetool host -model configs/models/$2 -o $dir/calibration/$2-host.json"
  bin/surfacetool host -model "configs/models/$2" -o "$dir/calibration/$2-host.json"
  ;;
real)
  build
  wait_quiet
  echo "# bin/surfacetool real -plan $dir/plans/$2.json -o $dir/real/$2.jsonl"
  bin/surfacetool real -plan "$dir/plans/$2.json" -o "$dir/real/$2.jsonl"
  ;;
fit)
  build
  echo "# bin/surfacetool fit -cal $dir/calibration/$2-host.json -o $dir/calibration/$2.json $dir/real/$2-calib.jsonl"
  bin/surfacetool fit -cal "$dir/calibration/$2-host.json" -o "$dir/calibration/$2.json" "$dir/real/$2-calib.jsonl"
  ;;
validate)
  build
  echo "# bin/surfacetool validate -cal $dir/calibration/$2.json $dir/real/$2-valid.jsonl"
  bin/surfacetool validate -cal "$dir/calibration/$2.json" "$dir/real/$2-valid.jsonl"
  ;;
surface)
  build
  echo "# $(date -u +%FT%TZ) bin/surfacetool surface -spec $dir/specs/$2.json -o $dir/$2.jsonl"
  bin/surfacetool surface -spec "$dir/specs/$2.json" -o "$dir/$2.jsonl"
  ;;
refine)
  build
  # Capacity runs are noisier (a repeat CV up to 0.2 against 0.05): a
  # configuration truly at the best can measure 30% under it in 3 runs.
  within=0.85
  if grep -q '"max_capacity"' "$dir/specs/$2.json"; then within=0.7; fi
  echo "# $(date -u +%FT%TZ) bin/surfacetool refine -within $within -spec $dir/specs/$2.json -surface $dir/$2.jsonl"
  bin/surfacetool refine -within "$within" -spec "$dir/specs/$2.json" -surface "$dir/$2.jsonl"
  ;;
capcheck)
  build
  echo "# $(date -u +%FT%TZ) bin/surfacetool capcheck -spec $dir/specs/$2.json"
  bin/surfacetool capcheck -spec "$dir/specs/$2.json"
  ;;
all)
  for m in ranker mlp; do
    "$0" host "$m"
    "$0" real "$m-calib"
    "$0" real "$m-valid"
    "$0" fit "$m"
    "$0" validate "$m"
  done
  for s in "$dir"/specs/*.json; do
    "$0" surface "$(basename "$s" .json)"
    "$0" refine "$(basename "$s" .json)"
  done
  ;;
*)
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
