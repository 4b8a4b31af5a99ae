"""One line per demo run: what it recommended, the confirmed figure, the
run's wall time and where the time went.

    python3 experiments/demo/summarize.py REPORT.json LABEL WALL_SECONDS

REPORT.json is `batchtune tune --json`'s report, REPORT.log beside it the
run's progress lines. The phases are summed over every trial from the
stored transitions: starting (restart until ready), warming, measuring.
"dominated" counts the trials whose line says their measurement stopped
once it was certainly below the best so far.
"""
import json
import sys
from datetime import datetime


def ts(s):
    """An RFC 3339 time with up to nanoseconds, in seconds."""
    whole, _, frac = s.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (frac or "0"))


def main():
    path, label, wall = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        r = json.load(open(path))
    except Exception as e:
        print(f"{label}: no report ({e}); see {path[:-5]}.log")
        return
    rec = r.get("recommendation")
    conf = r.get("confirmation") or {}
    if not rec:
        print(f"{label}: no recommendation ({conf.get('note', '')}); {wall} s")
        return
    phases = {}
    for t in r["trials"]:
        ph = t.get("phases") or []
        for a, b in zip(ph, ph[1:]):
            phases[a["state"]] = phases.get(a["state"], 0) + ts(b["at"]) - ts(a["at"])
    try:
        dominated = open(path[:-5] + ".log").read().count("certainly below the best so far")
    except OSError:
        dominated = "?"
    cfg = ",".join(f"{p['name']}={p['value']}" for p in rec["config"])
    w = conf["candidates"][conf["winner"]]
    e = w["estimate"]
    split = ", ".join(f"{k} {phases.get(k, 0):.0f} s" for k in ("starting", "warming", "measuring"))
    print(f"{label}: {cfg}: {e['mean']:.0f} req/s [{e['low']:.0f}, {e['high']:.0f}] over {w['repeats']} repeats; "
          f"{len(r['trials'])} trials, {wall} s ({split}; {dominated} stopped as dominated)")


main()
