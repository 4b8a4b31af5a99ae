#!/usr/bin/env bash
# Wall time of one study at search.parallelism 1, 2 and 3 on the test
# cluster (deploy/kubernetes/cluster/up.sh), with the stand-in's image.
#
#   BATCHTUNE_K8S_KUBECONFIG=$(deploy/kubernetes/cluster/up.sh) experiments/kubernetes/parallel.sh [N...]
#
# The study: configs/examples/emulator-kubernetes.yaml (the stand-in's
# ranker, 32 clients, 3-10 s measurements) with a grid of 6 configurations
# in place of its space (every one a search trial), then 1 candidate, the
# recipe and the baseline confirmed twice each, one at a time. The test cluster
# has one node, so spread is none: parallel trial pods share its cores and
# measure each other (the figures show the rounds' wall time, not what a
# node each would measure). Prints one line per N.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BATCHTUNE_K8S_KUBECONFIG:?set it to the kubeconfig of the test cluster (deploy/kubernetes/cluster/up.sh prints it)}"
go build -o bin/batchtune ./cmd/batchtune
work=$(mktemp -d)
trap '[ $? = 0 ] && rm -rf "$work" || echo "kept $work" >&2' EXIT
read -r l1 l5 l15 _ < /proc/loadavg
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $l1 $l5 $l15; configs/examples/emulator-kubernetes.yaml with 6 search trials, confirmation 3 x 2 (one at a time)"
[ $# -gt 0 ] || set -- 1 2 3
for n in "$@"; do
  study=$work/par$n.yaml
  # The bundled example study, with this experiment's cluster, spread,
  # and a grid of six search trials in place of its space and search.
  python3 - "$n" "$BATCHTUNE_K8S_KUBECONFIG" "$work" > "$study" <<'PY'
import sys
n, kubeconfig, work = sys.argv[1:]
doc = open("configs/examples/emulator-kubernetes.yaml").read()
doc = doc.replace("name: emulator-kubernetes\n", f"name: parallel-{n}\n", 1)
doc = doc.replace("  kubernetes:\n", f"  kubernetes:\n    kubeconfig: {kubeconfig}\n    spread: none\n", 1)
doc = doc[:doc.index("\nspace:\n")] + f"""
space:
  max_batch_size: {{values: [8, 16, 32]}}
  batch_timeout_micros: {{values: [5000, 20000]}}
  num_batch_threads: {{values: [1]}}
  max_enqueued_batches: {{values: [16]}}
  grpc_max_threads: {{values: [64]}}
search: {{strategy: grid, trials: 6, parallelism: {n}}}
confirmation: {{top_k: 1, repeats: 2, max_repeats: 2}}
export: {{path: {work}/batching-{n}.config}}
"""
print(doc, end="")
PY
  start=$(date +%s.%N)
  bin/batchtune tune --config "$study" --db "$work/db-$n" --state-dir "$work/state-$n" --json > "$work/rep-$n.json" 2> "$work/log-$n"
  end=$(date +%s.%N)
  python3 - "$n" "$start" "$end" "$work/rep-$n.json" <<'PY'
import json, sys
n, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rep = json.load(open(path))
ts = rep["trials"]
def span(role):
    sel = [t for t in ts if t.get("role") == role and t.get("phases")]
    if not sel: return 0
    from datetime import datetime
    p = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")[:26] + "+00:00" if "." in s else s.replace("Z", "+00:00"))
    return (max(p(t["phases"][-1]["at"]) for t in sel) - min(p(t["phases"][0]["at"]) for t in sel)).total_seconds()
search = [t for t in ts if t.get("role") == "search"]
objs = ", ".join("%d" % t["objective"] for t in search if t.get("objective") is not None)
rec = rep.get("recommendation") or {}
cfg = ",".join("%s=%d" % (p["name"], p["value"]) for p in rec.get("config", [])[:1])
print("parallelism %s: %.0f s wall, search stage %.0f s (%d trials; req/s %s), %d trials in all; recommended %s" %
      (n, end - start, span("search"), len(search), objs, len(ts), cfg or "nothing"))
PY
done
