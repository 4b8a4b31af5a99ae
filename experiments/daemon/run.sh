#!/usr/bin/env bash
# What a re-tune costs: one cold run, then warm-started runs of an unchanged
# model (each should keep the incumbent in at most 10 trials), then runs
# after the model became slower and larger. Runs `batchtune daemon` on the
# stand-in and triggers each run through its API once the previous ended.
# Usage: experiments/daemon/run.sh [WARM_RUNS_BEFORE] [RUNS_AFTER]
set -euo pipefail
before=${1:-5}
after=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
daemon_pid=
cleanup() {
	if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
		kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
cd "$root"
go build -o "$work/bin/" ./cmd/batchtune ./cmd/tfs-emulator

# The stand-in's ranker with device times of tens of milliseconds (clear of
# CPU noise), no cold-start penalty and a 100 ms load.
cp -R configs/models/ranker "$work/model"
model_json=$work/model/1/model.json
edit_model() { jq "$1" "$model_json" > "$model_json.new" && mv "$model_json.new" "$model_json"; }
edit_model '.load_time_ms = 100 | .host.preprocess_rounds = 1
  | .accelerator += {launch_us: 10000, item_us: 1000, knee_items: 16, cold_runs: 0}'
mkdir -p "$work/studies" "$work/out"
sed -e "s|@MODEL@|$work/model|" -e "s|@BIN@|$work/bin/tfs-emulator|" -e "s|@OUT@|$work/out|" \
	"$here/study.yaml" > "$work/studies/ranker.yaml"

"$work/bin/batchtune" daemon --studies "$work/studies" --db "$work/bt.db" --state-dir "$work/state" \
	--listen 127.0.0.1:0 2> "$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -s "$work/bt.db.daemon.json" ] && break; sleep 0.1; done
api=$(jq -r .url "$work/bt.db.daemon.json")/api/v1/studies/ranker

# run_once triggers a run and waits until the study is idle again.
run_once() {
	# A state-changing request must say it is not a browser's form post
	# (tuner/daemon/guard.go): the JSON content type, even with no body.
	curl -sf -X POST -H 'Content-Type: application/json' "$api/runs" > /dev/null
	sleep 0.5
	while [ "$(curl -sf "$api" | jq -r .state)" != idle ]; do sleep 0.5; done
}
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
run_once                                 # cold: no incumbent yet
for _ in $(seq "$before"); do run_once; done
# A new model version: twice the per-row device time, and weights that
# leave device memory for 14 rows (max_batch_size 16 no longer loads).
edit_model '.accelerator += {item_us: 2000, weights_mib: 16300}'
for _ in $(seq "$after"); do run_once; done

printf '%-4s %-11s %-12s %6s %9s  %s\n' run warm outcome trials wall_s detail
for id in $(curl -sf "$api/runs" | jq -r '.[].id'); do
	curl -sf "$api/runs/$id" | jq -r --arg id "$id" '
		(.run.ended | sub("\\.[0-9]+"; "") | fromdateiso8601) as $e
		| (.run.started | sub("\\.[0-9]+"; "") | fromdateiso8601) as $s
		| [$id, (if ($id == "1") then "cold" else "warm" end), .run.outcome, (.trials | length), ($e - $s), (.run.detail | .[0:110])]
		| @tsv' | awk -F'\t' '{ printf "%-4s %-11s %-12s %6s %9s  %s\n", $1, $2, $3, $4, $5, $6 }'
done
echo "# recommendations (accepted ones were exported and rolled out):"
curl -sf "$api/recommendations" | jq -r '.[] | "#\(.seq) run \(.run) accepted=\(.accepted) objective=\(.objective|floor) \(.batching | gsub("\n"; " "))"'
echo "# rollouts:"; cat "$work/out/rollout.log"
echo "# metrics:"; curl -sf "${api%/api/v1/studies/ranker}/metrics" | grep -E '^batchtune_(runs_total|rollouts_total|incumbent_degraded|trials_total)'
