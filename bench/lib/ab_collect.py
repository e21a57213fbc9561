"""ab_collect.py OUT -- reads what bench/ab left in OUT (runs/, datasets/,
meta.env) and writes OUT/ab_runs.csv (one row per plan line x profile x
run x mode), OUT/ab.csv (one row per plan line x profile), OUT/datasets.csv
(ibp analyze on every data set) and the gnuplot inputs OUT/plot_*.dat.

Time: the samples' own CUDA event timing of their copies after warm-up.
Their `h2d_seconds=` has a resolution of 1 us; the same figure is read
with more digits as timed_bytes / throughput_gbps (both printed by the
sample from the one event measurement).  On the simulated GPU it is the
virtual clock's modelled time on the run's profile (IBP_PROFILE), on a
real GPU measured time.  The figure of a line and profile is the median
over its runs.

Bytes over PCIe: A (libibp disabled) sends every byte the sample copies
(the `bytes=` of its result line).  B sends, for the copies libibp served,
its `bytes_read_pcie` (the stored bytes of every tensor a copy touches)
and, for the copies it left to the driver (gated, passed through, fallen
back), their bytes: bytes - bytes_requested + bytes_read_pcie.  The
one-time upload of the region's metadata (Mask, Bitval, flags:
metadata_bytes) is listed apart."""

import glob
import os
import re
import sys

from benchlib import (median, read_env, read_json, read_manifest, read_tabs,
                      write_csv)

RESULT = re.compile(r"^(\S+): ok bytes=(\d+) copies=(\d+) checksum=(0x[0-9a-f]+)")

# The acceptance rule of issue G (bench/README.md): under every profile, no
# line modelled slower with libibp than without by more than this.
SLOWER_LIMIT = 0.02

STAT_KEYS = ["copies_served", "copies_batched", "copies_passthrough",
             "copies_fallback",
             "copies_gated", "bytes_gated", "bytes_requested",
             "bytes_read_pcie", "metadata_bytes", "bytes",
             "compressed_bytes", "tensors_recompressed", "copies_staged"]

RUN_FIELDS = [
    "backend", "line", "sample", "data", "profile", "data_bytes",
    "tensor_bytes", "run", "mode", "checksum", "bytes", "copies",
    "timed_bytes", "h2d_seconds", "seconds", "bytes_pcie", "copies_served",
    "copies_batched", "copies_gated", "copies_passthrough", "copies_fallback", "bytes_gated",
    "state", "tensors_recompressed", "region_bytes", "region_saved_fraction",
    "metadata_bytes", "modelled_seconds_saved", "compress_seconds",
    "process_wall_s", "copies_staged", "host_bytes"]

AB_FIELDS = [
    "backend", "timing", "line", "sample", "data", "profile", "tensor_bytes",
    "runs", "modelled_ms_a", "modelled_ms_b", "spread_a", "spread_b",
    "speedup", "region_saved",
    "ideal", "speedup_vs_ideal", "slower_over_2pct", "bytes_a", "bytes_b",
    "pcie_saved", "copies", "copies_served", "copies_gated",
    "copies_passthrough", "copies_fallback", "degraded", "state",
    "gate_modelled_ms_saved", "metadata_bytes", "tensors_recompressed",
    "compress_seconds", "process_wall_a_s", "process_wall_b_s", "data_bytes",
    "regions", "args", "env", "copies_batched", "copies_staged",
    "host_bytes_b", "region_bytes_b"]

DATASET_FIELDS = [
    "name", "dtype", "tensor_bytes", "rows", "bytes", "package",
    "package_version", "source_file_in_package", "licence", "chunk_bytes",
    "threshold", "invariant80_fraction", "compressed_bytes", "metadata_bytes",
    "saved_fraction", "saved_fraction_with_metadata"]


def result_line(path):
    """The result line and the timing of a sample's stdout: (bytes, copies,
    checksum, timed_bytes, h2d_seconds, seconds)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    m = RESULT.match(lines[0]) if lines else None
    if not m:
        sys.exit(f"ab_collect: {path}: no result line")
    kv = dict(line.split("=", 1) for line in lines[1:] if "=" in line)
    try:
        timed = int(kv["timed_bytes"])
        h2d = float(kv["h2d_seconds"])
        gbps = float(kv["throughput_gbps"])
    except (KeyError, ValueError):
        sys.exit(f"ab_collect: {path}: no timed_bytes, h2d_seconds and "
                 "throughput_gbps lines")
    seconds = timed / (gbps * 1e9) if timed > 0 and gbps > 0 else h2d
    return int(m.group(2)), int(m.group(3)), m.group(4), timed, h2d, seconds


def stats_totals(path):
    """Sums over the regions of libibp's IBP_STATS JSON, and their states."""
    doc = read_json(path)
    regions = doc["regions"]
    t = {k: sum(int(r.get(k, 0)) for r in regions) for k in STAT_KEYS}
    for k in ("compress_seconds", "modelled_seconds_saved"):
        t[k] = sum(float(r.get(k, 0)) for r in regions)
    t["saved_fraction"] = float(doc["totals"]["saved_fraction"])
    t["tensor_bytes"] = regions[0]["tensor_bytes"] if regions else ""
    t["state"] = "+".join(sorted({r.get("state", "?") for r in regions}))
    # host memory once prepared: an ordinary region's is its pinned bytes
    # (its own pages and the shadow), a compact one's its shadow and the
    # pages not released (docs/CONFIG.md, "Statistics")
    t["host_bytes"] = sum(
        int(r.get("host_pinned_bytes", 0)) +
        (int(r.get("host_resident_bytes", 0))
         if r.get("tracker") == "compact" else 0)
        for r in regions)
    return t


def wall(path):
    with open(path, encoding="utf-8") as f:
        a, b = f.read().split()
    return float(b) - float(a)


def run_rows(env, meta_path, profile):
    """The ab_runs.csv rows of one plan line under one profile."""
    meta = read_tabs(meta_path)
    base = meta_path[:-len(".meta")]
    line = os.path.basename(base).split(".")[0]
    rows = []
    for k in range(1, int(env["runs"]) + 1):
        for mode in ("A", "B"):
            p = f"{base}.{profile}.{k}.{mode}"
            nbytes, copies, checksum, timed, h2d, secs = result_line(p + ".out")
            row = {"backend": env["backend"], "line": line,
                   "sample": meta["sample"], "data": meta["data"],
                   "profile": profile, "data_bytes": meta["data_bytes"],
                   "tensor_bytes": meta["tensor_bytes"], "run": k,
                   "mode": mode, "checksum": checksum, "bytes": nbytes,
                   "copies": copies, "timed_bytes": timed,
                   "h2d_seconds": h2d, "seconds": secs, "bytes_pcie": nbytes,
                   "process_wall_s": wall(p + ".wall")}
            if mode == "B":
                t = stats_totals(p + ".json")
                row.update({
                    "bytes_pcie": nbytes - t["bytes_requested"] + t["bytes_read_pcie"],
                    "region_bytes": t["bytes"],
                    "region_saved_fraction": t["saved_fraction"],
                    "state": t["state"]})
                for k2 in ("copies_served", "copies_batched", "copies_staged",
                           "copies_gated", "copies_passthrough",
                           "copies_fallback", "bytes_gated", "tensors_recompressed",
                           "metadata_bytes", "modelled_seconds_saved",
                           "compress_seconds", "host_bytes"):
                    row[k2] = t[k2]
                row["tensor_bytes"] = t["tensor_bytes"] or row["tensor_bytes"]
            rows.append(row)
    return rows, meta


def spread(rs):
    """(max - min) / median of the runs' seconds: how much they differ."""
    v = [r["seconds"] for r in rs]
    m = median(v)
    return (max(v) - min(v)) / m if m else None


def degraded(b_rows):
    n = sum("degraded" in r["state"] for r in b_rows)
    return "no" if n == 0 else "yes" if n == len(b_rows) else f"{n} of {len(b_rows)} runs"


def summarize(rows, meta, env):
    """One ab.csv row from the ab_runs.csv rows of one line and profile."""
    a = [r for r in rows if r["mode"] == "A"]
    b = [r for r in rows if r["mode"] == "B"]
    med = lambda rs, k: median([r[k] for r in rs if r.get(k, "") != ""])  # noqa: E731
    ta, tb = med(a, "seconds"), med(b, "seconds")
    pa, pb = med(a, "bytes_pcie"), med(b, "bytes_pcie")
    saved = med(b, "region_saved_fraction")
    ideal = 1 / (1 - saved) if saved < 1 else None
    speedup = ta / tb if ta and tb else None
    s = {k: b[0][k] for k in ("backend", "line", "sample", "data", "profile",
                              "data_bytes", "tensor_bytes", "copies")}
    s.update({
        "timing": env.get("timing", "modelled"), "runs": len(b),
        "modelled_ms_a": 1e3 * ta, "modelled_ms_b": 1e3 * tb,
        "spread_a": spread(a), "spread_b": spread(b),
        "speedup": speedup, "region_saved": saved, "ideal": ideal,
        "speedup_vs_ideal": speedup / ideal if speedup and ideal else None,
        "slower_over_2pct": ("yes" if tb > ta * (1 + SLOWER_LIMIT) else "no"),
        "bytes_a": pa, "bytes_b": pb, "pcie_saved": 1 - pb / pa if pa else None,
        "degraded": degraded(b), "state": b[-1]["state"],
        "gate_modelled_ms_saved": 1e3 * med(b, "modelled_seconds_saved"),
        "process_wall_a_s": med(a, "process_wall_s"),
        "process_wall_b_s": med(b, "process_wall_s"),
        "regions": meta["regions"], "args": meta["args"],
        "env": meta.get("env", "")})
    for k in ("copies_served", "copies_batched", "copies_staged", "copies_gated",
              "copies_passthrough", "copies_fallback", "metadata_bytes",
              "tensors_recompressed", "compress_seconds"):
        s[k] = med(b, k)
    s["host_bytes_b"] = med(b, "host_bytes")
    s["region_bytes_b"] = med(b, "region_bytes")
    return s


def dataset_rows(out, env):
    """datasets.csv: MANIFEST.tsv joined with ibp analyze --json."""
    manifest = read_manifest(env["data"])
    rows = []
    for name, m in manifest.items():
        path = os.path.join(out, "datasets", name + ".json")
        if not os.path.exists(path):
            continue
        j = read_json(path)
        row = {k: m.get(k, "") for k in DATASET_FIELDS}
        row["bytes"] = j["original_bytes"]
        for k in ("chunk_bytes", "threshold", "invariant80_fraction",
                  "compressed_bytes", "metadata_bytes", "saved_fraction",
                  "saved_fraction_with_metadata"):
            row[k] = j[k]
        rows.append(row)
    return rows


def write_plot_data(out, summary, profiles):
    """plot_bytes.dat: label, MB over PCIe A, then B under each profile;
    plot_speedup.dat: saved fraction, speedup, profile index, line index,
    label (one block of lines per profile)."""
    lines = []
    for s in summary:
        if s["line"] not in [x["line"] for x in lines]:
            lines.append(s)
    by = {(s["line"], s["profile"]): s for s in summary}
    with open(os.path.join(out, "plot_bytes.dat"), "w", encoding="utf-8") as f:
        f.write("# label A_MB " + " ".join(f"B_MB_{p}" for p in profiles) + "\n")
        for s in lines:
            bs = [by.get((s["line"], p)) for p in profiles]
            f.write(f'"{s["line"]}:{s["sample"]}/{s["data"]}" {s["bytes_a"] / 1e6:.6g} '
                    + " ".join(f'{x["bytes_b"] / 1e6:.6g}' if x else "NaN" for x in bs)
                    + "\n")
    with open(os.path.join(out, "plot_speedup.dat"), "w", encoding="utf-8") as f:
        f.write("# saved speedup profile_index line_index label\n")
        for i, p in enumerate(profiles):
            for j, s in enumerate(lines):
                x = by.get((s["line"], p))
                if x and x["speedup"] is not None:
                    f.write(f'{x["region_saved"]:.6g} {x["speedup"]:.6g} {i} {j} '
                            f'"{s["line"]}:{s["sample"]}/{s["data"]}"\n')


def main():
    out = sys.argv[1]
    env = read_env(os.path.join(out, "meta.env"))
    profiles = [p for p in env.get("profiles", "").split(",") if p]
    if not profiles:
        sys.exit("ab_collect: meta.env names no profile")
    all_rows, summary = [], []
    for meta_path in sorted(glob.glob(os.path.join(out, "runs", "*.meta"))):
        for p in profiles:
            rows, meta = run_rows(env, meta_path, p)
            all_rows += rows
            summary.append(summarize(rows, meta, env))
    write_csv(os.path.join(out, "ab_runs.csv"), RUN_FIELDS, all_rows)
    write_csv(os.path.join(out, "ab.csv"), AB_FIELDS, summary)
    write_csv(os.path.join(out, "datasets.csv"), DATASET_FIELDS,
              dataset_rows(out, env))
    write_plot_data(out, summary, profiles)


if __name__ == "__main__":
    main()
