"""ab_collect.py OUT -- reads what bench/ab left in OUT (runs/, datasets/,
meta.env) and writes OUT/ab.csv (one row per sample x data x run x mode),
OUT/ab_summary.csv (one row per sample x data), OUT/datasets.csv (ibp
analyze on every data set) and the gnuplot inputs OUT/plot_*.dat.

Bytes over PCIe: A (libibp disabled) sends every byte the sample copies
(the `bytes=` of its result line).  B sends, for the copies libibp served,
its `bytes_read_pcie` (the stored bytes of every tensor a copy touches)
and, for the copies it passed through or fell back on, their bytes:
bytes - bytes_requested + bytes_read_pcie.  The one-time upload of the
region's metadata (Mask, Bitval, flags: metadata_bytes) is listed apart.
Modelled transfer time: bytes / (pcie_gbps * 1e9)."""

import glob
import os
import re
import sys

from benchlib import (median, read_env, read_json, read_manifest, read_tabs,
                      write_csv)

RESULT = re.compile(r"^(\S+): ok bytes=(\d+) copies=(\d+) checksum=(0x[0-9a-f]+)")

AB_FIELDS = [
    "backend", "sample", "data", "data_bytes", "tensor_bytes", "run", "mode",
    "checksum", "bytes", "copies", "bytes_pcie", "copies_served",
    "copies_passthrough", "copies_fallback", "tensors_recompressed",
    "region_bytes", "region_saved_fraction", "metadata_bytes",
    "compress_seconds", "pcie_gbps_model", "modelled_transfer_s", "measured_gbps",
    "process_wall_s"]

SUMMARY_FIELDS = [
    "backend", "sample", "data", "data_bytes", "tensor_bytes", "runs",
    "bytes", "copies", "bytes_pcie_a", "bytes_pcie_b", "metadata_bytes",
    "region_saved_fraction", "pcie_saved_fraction", "modelled_a_s",
    "modelled_b_s", "modelled_speedup", "ideal_speedup", "speedup_vs_ideal",
    "measured_gbps_a", "measured_gbps_b", "measured_speedup",
    "copies_served", "copies_passthrough", "copies_fallback",
    "tensors_recompressed", "compress_seconds", "process_wall_a_s", "process_wall_b_s", "regions",
    "args"]

DATASET_FIELDS = [
    "name", "dtype", "tensor_bytes", "rows", "bytes", "package",
    "package_version", "source_file_in_package", "licence", "chunk_bytes",
    "threshold", "invariant80_fraction", "compressed_bytes", "metadata_bytes",
    "saved_fraction", "saved_fraction_with_metadata"]


def result_line(path):
    """(bytes, copies, checksum, measured GB/s or None) of a sample's stdout."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    m = RESULT.match(lines[0]) if lines else None
    if not m:
        sys.exit(f"ab_collect: {path}: no result line")
    gbps = None
    for line in lines:
        if line.startswith("throughput_gbps="):
            gbps = float(line.split("=", 1)[1])
    return int(m.group(2)), int(m.group(3)), m.group(4), gbps


def stats_totals(path):
    """Sums over the regions of libibp's IBP_STATS JSON."""
    doc = read_json(path)
    keys = ["copies_served", "copies_passthrough", "copies_fallback",
            "bytes_requested", "bytes_read_pcie", "metadata_bytes", "bytes",
            "compressed_bytes", "tensors_recompressed"]
    t = {k: sum(int(r.get(k, 0)) for r in doc["regions"]) for k in keys}
    t["compress_seconds"] = sum(float(r.get("compress_seconds", 0))
                                for r in doc["regions"])
    t["saved_fraction"] = float(doc["totals"]["saved_fraction"])
    t["tensor_bytes"] = doc["regions"][0]["tensor_bytes"] if doc["regions"] else ""
    return t


def wall(path):
    with open(path, encoding="utf-8") as f:
        a, b = f.read().split()
    return float(b) - float(a)


def run_rows(env, meta_path):
    """The ab.csv rows of one plan line (all its runs, A and B)."""
    meta = read_tabs(meta_path)
    base = meta_path[:-len(".meta")]
    gbps_model = float(env["pcie_gbps"])
    gpu = env.get("backend") == "gpu"
    rows = []
    for k in range(1, int(env["runs"]) + 1):
        for mode in ("A", "B"):
            p = f"{base}.{k}.{mode}"
            nbytes, copies, checksum, gbps = result_line(p + ".out")
            row = {"backend": env["backend"], "sample": meta["sample"],
                   "data": meta["data"], "data_bytes": meta["data_bytes"],
                   "tensor_bytes": meta["tensor_bytes"], "run": k,
                   "mode": mode, "checksum": checksum, "bytes": nbytes,
                   "copies": copies, "bytes_pcie": nbytes,
                   "pcie_gbps_model": gbps_model,
                   "measured_gbps": gbps if gpu else "",
                   "process_wall_s": wall(p + ".wall")}
            if mode == "B":
                t = stats_totals(p + ".json")
                row.update({
                    "bytes_pcie": nbytes - t["bytes_requested"] + t["bytes_read_pcie"],
                    "copies_served": t["copies_served"],
                    "copies_passthrough": t["copies_passthrough"],
                    "copies_fallback": t["copies_fallback"],
                    "tensors_recompressed": t["tensors_recompressed"],
                    "region_bytes": t["bytes"],
                    "region_saved_fraction": t["saved_fraction"],
                    "metadata_bytes": t["metadata_bytes"],
                    "compress_seconds": t["compress_seconds"]})
                row["tensor_bytes"] = row["tensor_bytes"] or t["tensor_bytes"]
            row["modelled_transfer_s"] = row["bytes_pcie"] / (gbps_model * 1e9)
            rows.append(row)
    return rows, meta


def summarize(rows, meta, env):
    """One ab_summary.csv row from the ab.csv rows of one plan line."""
    a = [r for r in rows if r["mode"] == "A"]
    b = [r for r in rows if r["mode"] == "B"]
    first_b = b[0]
    med = lambda rs, k: median([r[k] for r in rs if r[k] != ""])  # noqa: E731
    pa, pb = med(a, "bytes_pcie"), med(b, "bytes_pcie")
    saved = med(b, "region_saved_fraction")
    ideal = 1 / (1 - saved) if saved < 1 else None
    s = {k: first_b[k] for k in ("backend", "sample", "data", "data_bytes",
                                 "tensor_bytes", "bytes", "copies")}
    s.update({
        "runs": len(b), "bytes_pcie_a": pa, "bytes_pcie_b": pb,
        "metadata_bytes": med(b, "metadata_bytes"),
        "region_saved_fraction": saved, "pcie_saved_fraction": 1 - pb / pa,
        "modelled_a_s": med(a, "modelled_transfer_s"),
        "modelled_b_s": med(b, "modelled_transfer_s"),
        "modelled_speedup": pa / pb, "ideal_speedup": ideal,
        "speedup_vs_ideal": (pa / pb) / ideal if ideal else None,
        "copies_served": med(b, "copies_served"),
        "copies_passthrough": med(b, "copies_passthrough"),
        "copies_fallback": med(b, "copies_fallback"),
        "tensors_recompressed": med(b, "tensors_recompressed"),
        "compress_seconds": med(b, "compress_seconds"),
        "process_wall_a_s": med(a, "process_wall_s"),
        "process_wall_b_s": med(b, "process_wall_s"),
        "regions": meta["regions"], "args": meta["args"]})
    if env.get("backend") == "gpu":
        ga, gb = med(a, "measured_gbps"), med(b, "measured_gbps")
        s.update({"measured_gbps_a": ga, "measured_gbps_b": gb,
                  "measured_speedup": gb / ga if ga and gb else None})
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


def write_plot_data(out, summary, env):
    """plot_bytes.dat: label, MB over PCIe A and B; plot_speedup.dat: saved
    fraction, speedup (modelled, or measured on a GPU), label."""
    gpu = env.get("backend") == "gpu"
    with open(os.path.join(out, "plot_bytes.dat"), "w", encoding="utf-8") as f:
        f.write("# label A_MB B_MB\n")
        for s in summary:
            f.write(f'"{s["sample"]}/{s["data"]}" {s["bytes_pcie_a"] / 1e6:.6g} '
                    f'{s["bytes_pcie_b"] / 1e6:.6g}\n')
    with open(os.path.join(out, "plot_speedup.dat"), "w", encoding="utf-8") as f:
        f.write("# saved speedup label\n")
        for s in summary:
            y = s.get("measured_speedup") if gpu else s["modelled_speedup"]
            if y is None:
                continue
            f.write(f'{s["region_saved_fraction"]:.6g} {y:.6g} '
                    f'"{s["sample"]}/{s["data"]}"\n')


def main():
    out = sys.argv[1]
    env = read_env(os.path.join(out, "meta.env"))
    all_rows, summary = [], []
    for meta_path in sorted(glob.glob(os.path.join(out, "runs", "*.meta"))):
        rows, meta = run_rows(env, meta_path)
        all_rows += rows
        summary.append(summarize(rows, meta, env))
    write_csv(os.path.join(out, "ab.csv"), AB_FIELDS, all_rows)
    write_csv(os.path.join(out, "ab_summary.csv"), SUMMARY_FIELDS, summary)
    write_csv(os.path.join(out, "datasets.csv"), DATASET_FIELDS,
              dataset_rows(out, env))
    write_plot_data(out, summary, env)


if __name__ == "__main__":
    main()
