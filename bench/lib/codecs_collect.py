"""codecs_collect.py OUT -- reads the raw outputs bench/codecs.sh left in
OUT/codecs/ and writes OUT/codecs.csv: one row per data set x codec x
layout (row: every row compressed on its own; file: the whole file).

Speeds are MB/s = 1e6 bytes of original data per second, on one core:
zstd's and lz4's as their benchmark modes print them; ibp's from `ibp
bench --threads 1 --json` (GB/s there).  ibp's compress figure is the
whole preparation of a region -- bit statistics, threshold/chunk search,
packing -- as one rate (1 / sum of 1/rate); `pack_mbps` is the packing
alone.  Its decompress figure is the CPU reference decoder (libibp decodes
on the GPU)."""

import os
import re
import sys

from benchlib import read_json, read_tabs, write_csv

# " 1#name : 460032 -> 135335 (3.399), 880.3 MB/s , 982.2 MB/s" (lz4) or
# "... (x2.895),  31.8 MB/s, 114.0 MB/s" (zstd); progress lines end in CR.
RESULT = re.compile(r":\s*(\d+)\s*->\s*(\d+)\s*\(x?([0-9.]+)\),\s*([0-9.]+)\s*MB/s"
                    r"\s*,\s*([0-9.]+)\s*MB/s")

CLI_RUNS = [("zstd-1", "row", "zstd1-row"), ("zstd-3", "row", "zstd3-row"),
            ("lz4-1", "row", "lz4-row"), ("zstd-1", "file", "zstd1-file"),
            ("zstd-3", "file", "zstd3-file"), ("lz4-1", "file", "lz4-file")]

FIELDS = ["data_set", "bytes", "tensor_bytes", "limit", "codec", "layout",
          "compressed_bytes", "saved_fraction", "compress_mbps",
          "decompress_mbps", "pack_mbps", "search_s"]


def cli_result(path):
    """(input bytes, compressed bytes, compress MB/s, decompress MB/s) of the
    last complete result in a zstd -b / lz4 -b output."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read().replace("\r", "\n")
    found = RESULT.findall(text)
    if not found:
        sys.exit(f"codecs_collect: {path}: no benchmark result found")
    src, dst, _, c, d = found[-1]
    return int(src), int(dst), float(c), float(d)


def ibp_row(base):
    """The ibp row: space from ibp analyze (metadata counted), speed from
    ibp bench (one core)."""
    a = read_json(base + ".ibp-analyze.json")
    b = read_json(base + ".ibp-bench.json")["one_core"]
    total = int(a["original_bytes"])
    stored = int(a["compressed_bytes"]) + int(a["metadata_bytes"])
    rate = 1 / (1 / b["statistics"] + 1 / b["search"] + 1 / b["compress"])
    return {"codec": "ibp", "layout": "row", "compressed_bytes": stored,
            "saved_fraction": 1 - stored / total,
            "compress_mbps": rate * 1e3, "decompress_mbps": b["decompress"] * 1e3,
            "pack_mbps": b["compress"] * 1e3,
            "search_s": total / (b["search"] * 1e9)}


def set_rows(base):
    meta = read_tabs(base + ".meta")
    common = {"data_set": meta["name"], "bytes": int(meta["bytes"]),
              "tensor_bytes": int(meta["tensor_bytes"]), "limit": meta["limit"]}
    rows = [dict(common, **ibp_row(base))]
    for codec, layout, tag in CLI_RUNS:
        src, dst, c, d = cli_result(f"{base}.{tag}.txt")
        if src != common["bytes"]:
            sys.exit(f"codecs_collect: {base}.{tag}.txt: {src} bytes, "
                     f"expected {common['bytes']}")
        rows.append(dict(common, codec=codec, layout=layout,
                         compressed_bytes=dst, saved_fraction=1 - dst / src,
                         compress_mbps=c, decompress_mbps=d))
    return rows


def main():
    out = sys.argv[1]
    raw = os.path.join(out, "codecs")
    with open(os.path.join(raw, "sets.txt"), encoding="utf-8") as f:
        names = f.read().split()
    rows = []
    for name in names:
        rows += set_rows(os.path.join(raw, name))
    write_csv(os.path.join(out, "codecs.csv"), FIELDS, rows)
    write_plot_data(os.path.join(out, "plot_codecs.dat"), names, rows)


def write_plot_data(path, names, rows):
    """Space saved (%) per data set, one column per codec and layout."""
    cols = [("ibp", "row"), ("zstd-1", "row"), ("zstd-3", "row"),
            ("lz4-1", "row"), ("zstd-3", "file"), ("lz4-1", "file")]
    saved = {(r["data_set"], r["codec"], r["layout"]): r["saved_fraction"]
             for r in rows}
    with open(path, "w", encoding="utf-8") as f:
        f.write("# data_set " + " ".join(f"{c}_{l}" for c, l in cols) + "\n")
        for n in names:
            f.write(n + " " + " ".join(f"{100 * saved[(n, c, l)]:.4g}"
                                       for c, l in cols) + "\n")


if __name__ == "__main__":
    main()
