#!/usr/bin/env bash
# ceiling.sh: the capacity search when the load generator, not the server,
# is the limit. The stand-in (mlp.yaml's model) runs on core 1 only; the
# generator runs on core 0, shared with HOGS busy loops (default 2), so that it cannot
# offer much more than the server sustains. One capacity measurement
# (experiments/capacity/sweep -rates 0: burst, then the step search) of the
# same configuration, alternately with two builds of the sweep tool.
#
#   go build -o OLD/sweep ./experiments/capacity/sweep   # at the commit before
#   go build -o NEW/sweep ./experiments/capacity/sweep   # at the commit after
#   experiments/capacity/ceiling.sh OLD/sweep NEW/sweep [N]   # N pairs, default 5
#
# Needs 2 cores and taskset (util-linux). Prints, per measurement, the
# build, the capacity found, every step (rate, met), the generator's
# ceiling, whether the capacity is marked a lower bound, and the search's
# note.
set -euo pipefail
old=${1:?ceiling.sh OLD_SWEEP NEW_SWEEP [N]} new=${2:?ceiling.sh OLD_SWEEP NEW_SWEEP [N]} n=${3:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ -x bin/tfs-emulator ] || make build >/dev/null
tmp=experiments/capacity/tmp
mkdir -p "$tmp"
cat >"$tmp/pinned-emulator.sh" <<'SH'
#!/bin/sh
exec taskset -c 1 "$(dirname "$0")/../../../bin/tfs-emulator" "$@"
SH
chmod +x "$tmp/pinned-emulator.sh"
sed -e 's#binary: ../../bin/tfs-emulator#binary: ./pinned-emulator.sh#' \
    -e 's#base_path: ../../configs/#base_path: ../../../configs/#' \
    -e 's#path: ../../bin/#path: ../../../bin/#' experiments/capacity/mlp.yaml >"$tmp/mlp-pinned.yaml"
hogs=()
trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT
for _ in $(seq "${HOGS:-2}"); do
  taskset -c 0 sh -c 'while :; do :; done' &
  hogs+=($!)
done
cfg='max_batch_size=4 batch_timeout_micros=0 num_batch_threads=2'
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; $n pairs; config: $cfg"
for i in $(seq "$n"); do
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    taskset -c 0 "$bin" -study "$tmp/mlp-pinned.yaml" -rates 0 -config "$cfg" | python3 -c '
import json, sys
side = sys.argv[1]
for l in sys.stdin:
    d = json.loads(l)
    s = d["search"]
    steps = " ".join("%d%s" % (x["offered"], "+" if x["meets"] else "-") for x in s.get("steps") or [])
    print("%s capacity %.0f steps [%s] ceiling %.0f lower_bound %s resolved %s | %s" % (
        side, s["capacity"], steps, s.get("ceiling", 0), s.get("client_bound", False) or bool(d.get("generator_limit")),
        s["resolved"], (s.get("note") or "")[:110]))
' "$side"
  done
done
