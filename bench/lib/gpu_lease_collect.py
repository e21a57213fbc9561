#!/usr/bin/env python3
"""bench/gpu_lease.sh's results: OUT/lease.csv (one row per run) and each
run's libibp statistics (OUT/runs/LINE.K.B.json) into OUT/summary.csv, one
row per line: the medians of A (libibp loaded, disabled) and B (libibp
serving), their ratio, and what libibp did with the copies in B (from the
first run's statistics).  Prints the table.

    python3 bench/lib/gpu_lease_collect.py OUT
"""
import csv
import json
import os
import statistics
import sys

COUNTERS = ("copies_served", "copies_staged", "copies_batched",
            "copies_gated", "copies_passthrough", "copies_fallback",
            "bytes_requested", "bytes_read_pcie")


def totals(path):
    try:
        with open(path) as f:
            return json.load(f).get("totals", {})
    except (OSError, ValueError):
        return {}


def collect(out):
    lines = {}
    with open(os.path.join(out, "lease.csv")) as f:
        for r in csv.DictReader(f):
            t = lines.setdefault(r["line"], {"A": [], "B": [], "ok": True})
            if r["h2d_seconds"]:
                t[r["side"]].append(float(r["h2d_seconds"]))
            if r["exit"] != "0" or ": ok " not in r["result"]:
                t["ok"] = False
    rows = []
    for name, t in lines.items():
        if not t["A"] or not t["B"]:
            continue
        a, b = statistics.median(t["A"]), statistics.median(t["B"])
        tot = totals(os.path.join(out, "runs", f"{name}.1.B.json"))
        row = {"line": name, "runs": min(len(t["A"]), len(t["B"])),
               "a_ms": f"{a * 1e3:.3f}", "b_ms": f"{b * 1e3:.3f}",
               "speedup": f"{a / b:.3f}", "outputs_match": "yes" if t["ok"] else "no"}
        for k in COUNTERS:
            row[k] = tot.get(k, 0)
        rows.append(row)
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_lease_collect.py OUT")
    out = sys.argv[1]
    rows = collect(out)
    fields = ["line", "runs", "a_ms", "b_ms", "speedup", "outputs_match"] + list(COUNTERS)
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    print(f"{'line':24} {'A ms':>10} {'B ms':>10} {'A/B':>7}  served staged batched gated")
    for r in rows:
        print(f"{r['line']:24} {r['a_ms']:>10} {r['b_ms']:>10} {r['speedup']:>7}  "
              f"{r['copies_served']} {r['copies_staged']} {r['copies_batched']} "
              f"{r['copies_gated']}")


if __name__ == "__main__":
    main()
