#!/usr/bin/env python3
"""What the confirmation stage hands a user, per surface, from searchbench
-confirm -json outputs (one file per surface, strategies bayes, hillclimb
and random):

    python3 experiments/search-bench/confirmed.py C/vision.json C/ranker-tight.json ...

prints a Markdown table (a strategy a file lacks shows as –; settings
other than the default study's top 5, 3 repeats, up to 6 are named; before 2026-12-06 the default was top 3): the surface's resolution; the default's pick after
the budget and its confirmed winner (the median over seeds of the truth's
share of the best, 0 for a truly infeasible one or none); the other
strategies' confirmed winners; how often the default's winner is truly
infeasible (with how far its mean P99 is over the SLO: the smallest, the
median and the largest) and how often the stage recommends nothing; the
stage's mean repeats.
"""
import json
import math
import sys


def median(vals):
    """Nearest-rank median, as searchbench computes it."""
    vals = sorted(vals)
    return vals[max(0, math.ceil(0.5 * len(vals)) - 1)]


def duration_ms(text):
    for unit, scale in (("ms", 1.0), ("µs", 1e-3), ("us", 1e-3), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(f"unreadable duration {text!r}")


def main(paths):
    print("| surface | resolution | default: pick → confirmed | hill-climbing confirmed | random confirmed | default's winner truly infeasible (its P99 over the SLO: least, median, most) | default recommends nothing | repeats |")
    print("|---|---|---|---|---|---|---|---|")
    for path in paths:
        for rep in json.load(open(path)):
            if not rep.get("confirm"):
                sys.exit(f"{path}: {rep['surface']} ran without -confirm")
            best = rep["best_value"]
            maximise = rep["objective"] != "min_latency"
            slo = duration_ms(rep["slo"])

            def share(config, truth):
                if not config or not truth["feasible"]:
                    return 0.0
                return truth["value"] / best if maximise else best / truth["value"]

            rows = {row["strategy"]: row["runs"] for row in rep["rows"]}

            def confirmed(strategy):
                if strategy not in rows:
                    return "–"
                return f"{median([share(r.get('confirmed'), r['confirmed_truth']) for r in rows[strategy]]):.3f}"

            runs = rows["bayes"]
            pick = median([share(r.get("pick"), r["pick_truth"]) for r in runs])
            bad = sorted(r["confirmed_truth"]["p99"] / 1e6 / slo - 1 for r in runs
                         if r.get("confirmed") and not r["confirmed_truth"]["feasible"])
            none = sum(1 for r in runs if not r.get("confirmed"))
            over = f" ({100 * bad[0]:.1f}%, {100 * median(bad):.1f}%, {100 * bad[-1]:.1f}%)" if bad else ""
            repeats = sum(r.get("confirm_repeats", 0) for r in runs) / len(runs)
            n = len(runs)
            c = rep["confirm"]
            label = rep["surface"]
            if (c["top_k"], c["repeats"], c["max_repeats"]) != (5, 3, 6):
                label += f" (top {c['top_k']}, {c['repeats']} repeats, up to {c['max_repeats']})"
            if c.get("clean_repeats"):
                label += f" (clean_repeats {c['clean_repeats']})"
            print(f"| {label} | {100 * rep['resolution']:.1f}% | {pick:.3f} → {confirmed('bayes')} | "
                  f"{confirmed('hillclimb')} | {confirmed('random')} | {100 * len(bad) / n:.0f}%{over} | "
                  f"{100 * none / n:.0f}% | {repeats:.1f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
