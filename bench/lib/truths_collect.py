"""bench/truths.sh's table: per prior and truth, the worst line of
bench/ab's ab.csv and the lines more than 2 % slower with libibp.

    truths_collect.py OUT.csv PRIOR TRUTH AB.csv [PRIOR TRUTH AB.csv ...]
"""
import csv
import sys

SLOWER = 0.98  # the acceptance rule: no line under 0.98 x A's speed


def main(argv):
    if len(argv) < 5 or (len(argv) - 2) % 3:
        sys.exit("usage: truths_collect.py OUT.csv PRIOR TRUTH AB.csv ...")
    out, triples = argv[1], argv[2:]
    table, holds = [], True
    for i in range(0, len(triples), 3):
        prior, truth, path = triples[i : i + 3]
        with open(path, newline="") as f:
            lines = list(csv.DictReader(f))
        if not lines:
            sys.exit(f"truths_collect.py: no line in {path}")
        # mode=compact lines trade copy time for host memory by design
        # (docs/CONFIG.md): not under the rule
        lines = [r for r in lines if "mode=compact" not in r.get("regions", "")]
        worst = min(lines, key=lambda r: float(r["speedup"]))
        slow = [r["line"] for r in lines if float(r["speedup"]) < SLOWER]
        holds = holds and not slow
        table.append(
            {
                "prior": prior,
                "truth": truth,
                "lines": len(lines),
                "worst_line": worst["line"],
                "worst_sample": worst["sample"],
                "worst_speedup": f"{float(worst['speedup']):.3f}",
                "slower_over_2pct": " ".join(slow) or "-",
            }
        )
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    print(f"{'prior':<12} {'truth':<24} {'worst':>6}  line  sample          >2 % slower")
    for r in table:
        print(
            f"{r['prior']:<12} {r['truth']:<24} {r['worst_speedup']:>6}  "
            f"{r['worst_line']:<4}  {r['worst_sample']:<14}  {r['slower_over_2pct']}"
        )
    print(f"[truths] table: {out}")
    print(
        "[truths] no line more than 2 % slower under any prior and truth: "
        + ("**holds**" if holds else "**does not hold**")
    )


if __name__ == "__main__":
    main(sys.argv)
