#!/usr/bin/env bash
# search-bench: how fast the strategies suggest, and how many trials each
# needs on recorded performance surfaces.
#
#   experiments/search-bench/run.sh suggest             # time one suggestion, 100 and 500 trials of history
#   experiments/search-bench/run.sh compare [FILE...]   # every strategy over recorded surfaces
#   experiments/search-bench/run.sh compare design      # the surfaces the search was designed on
#   experiments/search-bench/run.sh compare heldout     # the surfaces held out (experiments/surfaces/sets)
#   experiments/search-bench/run.sh compare capacity-design, capacity-heldout   # the max_capacity surfaces, split the same way
#
# compare reads surface files (format: package search/replay, doc.go);
# without arguments it takes experiments/surfaces/*.jsonl. Environment for
# compare: SEEDS (30), BUDGET (50), HORIZON (0: the tool's default, 400 or
# the runnable count), and FLAGS, more searchbench flags
# (e.g. FLAGS="-set bayes.init=6").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH=$PATH:/usr/local/go/bin

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
*)
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
