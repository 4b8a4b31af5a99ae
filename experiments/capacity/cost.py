#!/usr/bin/env python3
"""Per-trial measuring time (measuring phase to the trial's end) and whole
trial time of tune --json reports: python3 experiments/capacity/cost.py A.json [B.json]."""
import json, statistics, sys
from datetime import datetime

def t(s):
    return datetime.fromisoformat(s.replace('Z', '+00:00'))

for path in sys.argv[1:]:
    r = json.load(open(path))
    meas, whole = [], []
    for tr in r['trials']:
        ph = {p['state']: t(p['at']) for p in tr.get('phases', [])}
        if 'measuring' not in ph or tr['state'] not in ('succeeded', 'early-stopped'):
            continue
        end = t(tr['phases'][-1]['at'])
        meas.append((end - ph['measuring']).total_seconds())
        whole.append((end - t(tr['phases'][0]['at'])).total_seconds())
    print(f"{path}: {len(meas)} trials; measuring median {statistics.median(meas):.1f} s "
          f"(mean {statistics.mean(meas):.1f}); whole trial median {statistics.median(whole):.1f} s; "
          f"run elapsed {r['elapsed_ns']/1e9:.0f} s")
