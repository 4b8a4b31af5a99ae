#!/usr/bin/env bash
# The acceptance-soak figures of verify.md: one soak that passes and one
# that fails, against the bundled stand-in (configs/examples/emulator-process.yaml,
# the ranker model through the process runtime). Short soaks (6 s in 2 s
# intervals) so that the figures fit a shared 2-core machine; the default
# is 5 minutes in 10 s intervals.
#
#   make build && experiments/capacity/verify.sh [OUTDIR]
set -u
cd "$(dirname "$0")/../.."
out=${1:-experiments/capacity/verify-out}
mkdir -p "$out"
db=$(mktemp -d)/verify.db
study=configs/examples/emulator-process.yaml

cat > "$out/pass.config" <<'CFG'
max_batch_size { value: 16 }
batch_timeout_micros { value: 2000 }
max_enqueued_batches { value: 16 }
num_batch_threads { value: 2 }
CFG
# One batch of one request at a time and a one-batch queue: far under
# what 600 req/s needs.
cat > "$out/fail.config" <<'CFG'
max_batch_size { value: 1 }
batch_timeout_micros { value: 0 }
max_enqueued_batches { value: 1 }
num_batch_threads { value: 1 }
CFG

# A deep queue behind one thread and batches of 4: nothing is refused, the
# backlog grows instead.
cat > "$out/backlog.config" <<'CFG'
max_batch_size { value: 4 }
batch_timeout_micros { value: 0 }
max_enqueued_batches { value: 1000 }
num_batch_threads { value: 1 }
CFG

run() {
	name=$1; shift
	echo "\$ batchtune verify $*" > "$out/$name.txt"
	bin/batchtune verify --db "$db" --state-dir "$(dirname "$db")/state" "$@" >> "$out/$name.txt" 2>&1
	echo "exit status $?" >> "$out/$name.txt"
	cat "$out/$name.txt"
}
run pass --config "$out/pass.config" --flags=--grpc_max_threads=64 --rate 100 --duration 6s --interval 2s "$study"
run fail --config "$out/fail.config" --flags=--grpc_max_threads=64 --rate 600 --duration 6s --interval 2s "$study"
run backlog --config "$out/backlog.config" --flags=--grpc_max_threads=64 --rate 600 --duration 6s --interval 2s "$study"
bin/batchtune verify --db "$db" --state-dir "$(dirname "$db")/state" --json --config "$out/pass.config" --rate 100 --duration 2s --interval 2s "$study" > "$out/pass-short.json" 2>/dev/null
echo "json exit status $?"
