#!/usr/bin/env bash
# The emulator-surface experiment: the ranker (accelerator model) under a
# fixed closed-loop concurrency, every configuration on a fresh stand-in
# process, measured by the closed-loop driver in driver/.
#
#   experiments/emulator-surface/run.sh surface   # max_batch_size x batch_timeout_micros
#   experiments/emulator-surface/run.sh queue     # max_enqueued_batches
#   experiments/emulator-surface/run.sh threads   # num_batch_threads, intra/inter-op threads
#   experiments/emulator-surface/run.sh compare   # TF defaults vs seed recipe vs best, repeated
#   experiments/emulator-surface/run.sh cpu       # the MLP (CPU model): intra x inter-op threads
#   experiments/emulator-surface/run.sh one NAME MBS TIMEOUT THREADS QUEUE INTRA INTER
#   experiments/emulator-surface/run.sh summarize ROWS   # compare's summary of saved rows
#
# Environment: C (concurrency, 64), D (measured seconds per trial, 8s),
# W (unmeasured warmup per trial, 15s: long enough that the batch sizes a
# configuration forms have paid their first-execution cold start), REPS
# (compare rounds, 5), SLO_MS (compare's P99 objective, 50), MODEL
# (ranker), and
# SERVER_FLAGS, server flags fixed for the whole study (default
# --grpc_max_threads=256: TF's default is 4 x cores, which on a 2-core
# machine lets only 8 requests into the server at once and caps every
# batch at 8 whatever the batching config says).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH=$PATH:/usr/local/go/bin

C=${C:-64}
D=${D:-8s}
W=${W:-15s}
REPS=${REPS:-5}
SLO_MS=${SLO_MS:-50}
MODEL=${MODEL:-ranker}
SERVER_FLAGS=${SERVER_FLAGS---grpc_max_threads=256}
inputs_of() {
  case "$1" in
    ranker) echo "features:256:float" ;;
    mlp) echo "dense:96:float,ids:32:int64" ;;
    *) echo "run.sh: no inputs known for model $1" >&2; exit 2 ;;
  esac
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/tfs-emulator" ./cmd/tfs-emulator
go build -o "$work/driver" ./experiments/emulator-surface/driver

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# trial LABEL MBS TIMEOUT_US THREADS QUEUE INTRA INTER
# An empty MBS, TIMEOUT, THREADS or QUEUE leaves the field unset (TF's
# default); INTRA/INTER 0 is TF's auto.
trial() {
  local label=$1 mbs=$2 timeout=$3 threads=$4 queue=$5 intra=$6 inter=$7
  local cfg="$work/batching.config"
  : >"$cfg"
  [ -n "$mbs" ] && echo "max_batch_size { value: $mbs }" >>"$cfg"
  [ -n "$timeout" ] && echo "batch_timeout_micros { value: $timeout }" >>"$cfg"
  [ -n "$threads" ] && echo "num_batch_threads { value: $threads }" >>"$cfg"
  [ -n "$queue" ] && echo "max_enqueued_batches { value: $queue }" >>"$cfg"
  echo 'prometheus_config { enable: true, path: "/monitoring/prometheus/metrics" }' >"$work/monitoring.config"
  local gp rp
  gp=$(free_port)
  rp=$(free_port)
  while [ "$rp" = "$gp" ]; do rp=$(free_port); done
  "$work/tfs-emulator" --port="$gp" --rest_api_port="$rp" --model_name="$MODEL" \
    --model_base_path="configs/models/$MODEL" --enable_batching --batching_parameters_file="$cfg" \
    --monitoring_config_file="$work/monitoring.config" --max_num_load_retries=0 \
    --tensorflow_intra_op_parallelism="$intra" --tensorflow_inter_op_parallelism="$inter" \
    $SERVER_FLAGS >"$work/server.log" 2>&1 &
  local pid=$!
  if ! "$work/driver" -addr "127.0.0.1:$gp" -metrics "http://127.0.0.1:$rp/monitoring/prometheus/metrics" \
      -model "$MODEL" -inputs "$(inputs_of "$MODEL")" -c "$C" -warmup "$W" -d "$D" -row -label "$label"; then
    echo "$label: driver failed; server log:" >&2
    tail -5 "$work/server.log" >&2
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

header() {
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores; warmup $W, measured $D"
  "$work/driver" -header
}

surface() {
  echo "# max_batch_size x batch_timeout_micros; num_batch_threads 1, max_enqueued_batches 1000, intra/inter auto; C=$C"
  header
  for mbs in 1 2 4 8 16 32 64 128 256; do
    for t in 0 1000 2000 5000 10000 20000; do
      trial "mbs=$mbs,timeout=$t" "$mbs" "$t" 1 1000 0 0
    done
  done
}

queue() {
  echo "# max_enqueued_batches; max_batch_size 8, timeout 0, num_batch_threads 1; C=$C"
  header
  for q in 1 2 4 8 16 32; do
    trial "queue=$q" 8 0 1 "$q" 0 0
  done
}

threads() {
  echo "# num_batch_threads and intra/inter-op threads; max_batch_size 64, timeout 10000, queue 1000; C=$C"
  header
  for nbt in 1 2 4; do
    for ii in "1 1" "2 2" "8 8"; do
      set -- $ii
      trial "threads=$nbt,intra=$1,inter=$2" 64 10000 "$nbt" 1000 "$1" "$2"
    done
  done
}

cpu() {
  local model_was=$MODEL c_was=$C
  MODEL=mlp
  C=${CPU_C:-16}
  echo "# mlp (CPU model): intra x inter-op threads; max_batch_size 32, timeout 1000, num_batch_threads 2, queue 1000; C=$C"
  header
  for intra in 1 2 4 8; do
    for inter in 1 2 4; do
      trial "intra=$intra,inter=$inter" 32 1000 2 1000 "$intra" "$inter"
    done
  done
  MODEL=$model_was
  C=$c_was
}

# The candidates compare measures against TF's defaults and the seeds'
# recipe: label:mbs:timeout_us:threads:queue:intra:inter, space-separated.
# The defaults are the best configurations the sweeps above found.
BESTS=${BESTS:-"best:64:10000:1:64:1:1 best-2t:64:20000:2:64:1:1"}

compare() {
  echo "# TF defaults vs the seeds' recipe vs the sweeps' best, interleaved, $REPS rounds; C=$C"
  header
  local rows="$work/compare.tsv"
  : >"$rows"
  for r in $(seq 1 "$REPS"); do
    trial "tf-defaults#$r" "" "" "" "" 0 0 | tee -a "$rows"
    trial "seed-recipe#$r" 8 20000 1 32 0 0 | tee -a "$rows"
    for b in $BESTS; do
      IFS=: read -r label mbs timeout threads queue intra inter <<<"$b"
      trial "$label#$r" "$mbs" "$timeout" "$threads" "$queue" "$intra" "$inter" | tee -a "$rows"
    done
  done
  summarize "$rows"
}

# summarize: per configuration, the median QPS and P99 over the rounds,
# how many rounds met the SLO (P99 <= SLO_MS and errors <= 0.1%), and the
# median QPS as a multiple of TF's defaults' and of the seed recipe's.
summarize() {
  echo "# summary: median over rounds; SLO P99 <= ${SLO_MS} ms and errors <= 0.1%"
  printf 'config\tmedian_qps\tmedian_p99_ms\trounds_in_slo\tx_tf_defaults\tx_seed_recipe\n'
  local labels
  labels=$(cut -f1 "$1" | sed 's/#.*//' | awk '!seen[$0]++')
  median() { sort -n | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
  local dq sq
  dq=$(awk -F'\t' '$1 ~ /^tf-defaults#/ {print $2}' "$1" | median)
  sq=$(awk -F'\t' '$1 ~ /^seed-recipe#/ {print $2}' "$1" | median)
  for l in $labels; do
    local q p ok n
    q=$(awk -F'\t' -v l="$l" 'index($1, l "#") == 1 {print $2}' "$1" | median)
    p=$(awk -F'\t' -v l="$l" 'index($1, l "#") == 1 {print $4}' "$1" | median)
    ok=$(awk -F'\t' -v l="$l" -v s="$SLO_MS" 'index($1, l "#") == 1 && $4 <= s && $6 <= 0.1 {n++} END {print n+0}' "$1")
    n=$(awk -F'\t' -v l="$l" 'index($1, l "#") == 1 {n++} END {print n+0}' "$1")
    awk -v l="$l" -v q="$q" -v p="$p" -v ok="$ok" -v n="$n" -v dq="$dq" -v sq="$sq" \
      'BEGIN {printf "%s\t%.0f\t%.1f\t%d/%d\t%.2f\t%.2f\n", l, q, p, ok, n, q/dq, q/sq}'
  done
}

case "${1:-all}" in
  surface) surface ;;
  queue) queue ;;
  threads) threads ;;
  compare) compare ;;
  cpu) cpu ;;
  one) shift; header; trial "$@" ;;
  summarize) summarize "$2" ;; # rows saved from a compare run
  all) surface; echo; queue; echo; threads; echo; cpu; echo; compare ;;
  *) echo "usage: $0 surface|queue|threads|cpu|compare|all|one LABEL MBS TIMEOUT THREADS QUEUE INTRA INTER" >&2; exit 2 ;;
esac
