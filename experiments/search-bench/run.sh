#!/usr/bin/env bash
# search-bench: how fast the strategies suggest, and how many trials each
# needs on recorded performance surfaces.
#
#   experiments/search-bench/run.sh suggest             # time one suggestion, 100 and 500 trials of history
#   experiments/search-bench/run.sh compare [FILE...]   # every strategy over recorded surfaces
#   experiments/search-bench/run.sh compare design      # the surfaces the search was designed on
#   experiments/search-bench/run.sh compare heldout     # the surfaces held out (experiments/surfaces/sets)
#   experiments/search-bench/run.sh compare capacity-design, capacity-heldout   # the max_capacity surfaces, split the same way
#   experiments/search-bench/run.sh verdict SETTING [SET...]   # a Bayes setting against the default (experiments/surfaces/sets rule)
#   DEFAULTS=DIR run.sh verdict SETTING                        # the same, the default's runs read from DIR/NAME.default.json
#   experiments/search-bench/run.sh confirmed [SET...]         # what the confirmation stage hands a user (searchbench -confirm)
#   experiments/search-bench/run.sh confirmed heldout4         # the same on the fourth held-out set (2026-12-06), run once
#   experiments/search-bench/run.sh fresh SETTING SURFACE...   # a verdict's second stage: seeds 101-300
#   experiments/search-bench/run.sh picks BUDGET SETTING SET... # the picks after a study's own budget (12 for the demo's)
#
# compare reads surface files (format: package search/replay, doc.go);
# without arguments it takes experiments/surfaces/*.jsonl. Environment for
# compare: SEEDS (30), BUDGET (50), HORIZON (0: the tool's default, 400 or
# the runnable count), and FLAGS, more searchbench flags
# (e.g. FLAGS="-set bayes.init=6").
#
# verdict runs Bayes with and without SETTING (e.g. bayes.xi=0.01) on every
# surface of the named sets (default: the thirteen design surfaces, design
# design2 capacity-design capacity-design2), SEEDS (100) seeds each, budget
# 50, horizon 100, writes the -json outputs under
# experiments/search-bench/tmp/, then compares them (searchbench -compare):
# won or lost per surface and target where the Mann-Whitney test over
# seeds says p < 0.05, and which of those survive Holm's correction (the
# rule in experiments/surfaces/sets since the ninth session). The default's
# runs do not depend on SETTING: DEFAULTS=DIR reads them from
# DIR/NAME.default.json (a previous verdict's tmp/verdict, copied), or else
# from DIR/NAME.json, a run.sh confirmed output under today's default (its
# bayes arm), instead of running them again, which halves a verdict's time.
#
# confirmed runs bayes, hillclimb and random with -confirm (the tuner's
# confirmation stage after the budget) on every surface of the named sets
# (default: the fourteen held out, heldout heldout2 heldout3
# capacity-heldout), SEEDS (100) seeds, budget 50, horizon 100, into
# experiments/search-bench/tmp/confirmed/NAME.json; then compares the
# default with hill-climbing and with random (searchbench -compare: the
# trials, the picks and the confirmed winners) and prints the per-surface
# table of experiments/search-bench/confirmed.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH=$PATH:/usr/local/go/bin

# set_names prints the surfaces of the named sets of experiments/surfaces/sets.
set_names() {
  for set in "$@"; do
    line=$(grep "^$set:" experiments/surfaces/sets) || { echo "run.sh: no set $set in experiments/surfaces/sets" >&2; exit 1; }
    echo "${line#*:}"
  done
}

# run_pair OUT NAME SUFFIX SETTING FLAG...: Bayes with the default and with
# SETTING on surface NAME, searchbench's FLAGs for both, into
# OUT/NAME.default$SUFFIX.json and OUT/NAME.setting$SUFFIX.json.
run_pair() {
  local out=$1 n=$2 suffix=$3 setting=$4
  shift 4
  bin/searchbench -strategies bayes "$@" -json "experiments/surfaces/$n.jsonl" >"$out/$n.default$suffix.json"
  bin/searchbench -strategies bayes "$@" -json -set "$setting" "experiments/surfaces/$n.jsonl" >"$out/$n.setting$suffix.json"
}

case "${1:-}" in
suggest)
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(go version | cut -d' ' -f3)"
  echo "# go test ./search -run '^\$' -bench BenchmarkSuggest -benchtime 5x -count 3"
  go test ./search -run '^$' -bench BenchmarkSuggest -benchtime 5x -count 3 | grep -E '^(Benchmark|ok)'
  ;;
compare)
  shift
  files=("$@")
  if [ ${#files[@]} -eq 1 ] && grep -q "^$1:" experiments/surfaces/sets 2>/dev/null; then
    files=()
    for n in $(grep "^$1:" experiments/surfaces/sets | cut -d: -f2); do
      files+=("experiments/surfaces/$n.jsonl")
    done
  fi
  if [ ${#files[@]} -eq 0 ]; then
    shopt -s nullglob
    files=(experiments/surfaces/*.jsonl)
  fi
  if [ ${#files[@]} -eq 0 ]; then
    echo "run.sh compare: no surfaces: name files, or record them under experiments/surfaces/ first" >&2
    exit 1
  fi
  go build -o bin/searchbench ./cmd/searchbench
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; bin/searchbench -seeds ${SEEDS:-30} -budget ${BUDGET:-50} -horizon ${HORIZON:-0} ${FLAGS:-} ${files[*]}"
  # shellcheck disable=SC2086 # FLAGS is a list of flags
  bin/searchbench -seeds "${SEEDS:-30}" -budget "${BUDGET:-50}" -horizon "${HORIZON:-0}" ${FLAGS:-} "${files[@]}"
  ;;
verdict)
  shift
  setting=${1:?run.sh verdict SETTING [SET...], e.g. bayes.xi=0.01}
  shift
  sets=("$@")
  [ ${#sets[@]} -gt 0 ] || sets=(design design2 capacity-design capacity-design2)
  list=$(set_names "${sets[@]}") # an unknown set ends the script here
  read -ra names <<<"${list//$'\n'/ }"
  go build -o bin/searchbench ./cmd/searchbench
  out=experiments/search-bench/tmp/verdict
  if [ -n "${DEFAULTS:-}" ] && [ "$(cd "$DEFAULTS" && pwd)" = "$(cd "$out" 2>/dev/null && pwd)" ]; then
    echo "run.sh verdict: DEFAULTS must not be $out, which a verdict clears; copy it elsewhere first" >&2
    exit 1
  fi
  rm -rf "$out" && mkdir -p "$out"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; bin/searchbench -strategies bayes -seeds ${SEEDS:-100} -budget 50 -horizon 100 -json [-set $setting] SURFACE, then -compare; surfaces: ${names[*]}"
  olds=() news=()
  for n in "${names[@]}"; do
    old="$out/$n.default.json"
    if [ -n "${DEFAULTS:-}" ] && [ -f "$DEFAULTS/$n.default.json" ]; then
      cp "$DEFAULTS/$n.default.json" "$out/$n.default.json"
    elif [ -n "${DEFAULTS:-}" ]; then
      # A run.sh confirmed output: its bayes arm is the default's -json
      # runs seed for seed.
      cp "$DEFAULTS/$n.json" "$out/$n.confirmed.json"
      old="$out/$n.confirmed.json:bayes"
    else
      bin/searchbench -strategies bayes -seeds "${SEEDS:-100}" -budget 50 -horizon 100 -json "experiments/surfaces/$n.jsonl" >"$out/$n.default.json"
    fi
    bin/searchbench -strategies bayes -seeds "${SEEDS:-100}" -budget 50 -horizon 100 -json -set "$setting" "experiments/surfaces/$n.jsonl" >"$out/$n.setting.json"
    olds+=("$old") news+=("$out/$n.setting.json")
  done
  bin/searchbench -compare "${olds[@]}" -- "${news[@]}"
  ;;
fresh)
  # fresh SETTING SURFACE...: a verdict's second stage on fresh seeds: the
  # default and SETTING at seeds 1-300, seeds 1-100 (the screen's runs,
  # seed for seed) dropped from both sides, then compared.
  shift
  setting=${1:?run.sh fresh SETTING SURFACE..., e.g. bayes.feasibility_weight=2 ranker mlp-mid}
  shift
  [ $# -gt 0 ] || { echo "run.sh fresh: name the surfaces" >&2; exit 2; }
  go build -o bin/searchbench ./cmd/searchbench
  out=experiments/search-bench/tmp/fresh
  rm -rf "$out" && mkdir -p "$out"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; bin/searchbench -strategies bayes -seeds 300 -budget 50 -horizon 100 -json [-set $setting] SURFACE, seeds 101-300 kept, then -compare; surfaces: $*"
  olds=() news=()
  for n in "$@"; do
    run_pair "$out" "$n" 300 "$setting" -seeds 300 -budget 50 -horizon 100
    for side in default setting; do
      python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for r in d:
    for row in r["rows"]:
        row["runs"]=[x for x in row["runs"] if x["seed"]>100]
json.dump(d,open(sys.argv[2],"w"))' "$out/$n.${side}300.json" "$out/$n.$side.json"
    done
    olds+=("$out/$n.default.json") news+=("$out/$n.setting.json")
  done
  bin/searchbench -compare "${olds[@]}" -- "${news[@]}"
  ;;
picks)
  # picks BUDGET SETTING SET...: the default against SETTING by what each
  # run's pick is worth after a budget of BUDGET trials (a study's own
  # budget: 12 for the demo's), 100 seeds, per surface of the named sets.
  shift
  budget=${1:?run.sh picks BUDGET SETTING SET..., e.g. 12 bayes.burst_starts=1 capacity-design}
  setting=${2:?run.sh picks BUDGET SETTING SET...}
  shift 2
  list=$(set_names "$@")
  read -ra names <<<"${list//$'\n'/ }"
  go build -o bin/searchbench ./cmd/searchbench
  out=experiments/search-bench/tmp/picks
  rm -rf "$out" && mkdir -p "$out"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; bin/searchbench -strategies bayes -seeds ${SEEDS:-100} -budget $budget -horizon $budget -json [-set $setting] SURFACE, then -compare; surfaces: ${names[*]}"
  olds=() news=()
  for n in "${names[@]}"; do
    run_pair "$out" "$n" "" "$setting" -seeds "${SEEDS:-100}" -budget "$budget" -horizon "$budget"
    olds+=("$out/$n.default.json") news+=("$out/$n.setting.json")
  done
  bin/searchbench -compare "${olds[@]}" -- "${news[@]}"
  ;;
confirmed)
  shift
  sets=("$@")
  [ ${#sets[@]} -gt 0 ] || sets=(heldout heldout2 heldout3 capacity-heldout)
  list=$(set_names "${sets[@]}") # an unknown set ends the script here
  read -ra names <<<"${list//$'\n'/ }"
  go build -o bin/searchbench ./cmd/searchbench
  out=experiments/search-bench/tmp/confirmed
  rm -rf "$out" && mkdir -p "$out"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; bin/searchbench -strategies bayes,hillclimb,random -seeds ${SEEDS:-100} -budget 50 -horizon 100 -confirm -json SURFACE, then -compare; surfaces: ${names[*]}"
  files=()
  for n in "${names[@]}"; do
    bin/searchbench -strategies bayes,hillclimb,random -seeds "${SEEDS:-100}" -budget 50 -horizon 100 -confirm -json "experiments/surfaces/$n.jsonl" >"$out/$n.json"
    files+=("$out/$n.json")
  done
  for other in hillclimb random; do
    echo "## the default (bayes) against $other"
    bin/searchbench -compare "${files[@]/%/:$other}" -- "${files[@]/%/:bayes}"
  done
  python3 experiments/search-bench/confirmed.py "${files[@]}"
  ;;
*)
  sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
