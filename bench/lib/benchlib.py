"""Shared helpers of bench/lib/*.py: the files bench/ab and bench/codecs.sh
write, read back.  Standard library only."""

import csv
import json
import os
import statistics


def read_env(path):
    """KEY=VALUE lines (meta.env) as a dict; {} when the file is absent."""
    env = {}
    if not os.path.exists(path):
        return env
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.rstrip("\n").partition("=")
            if sep:
                env[key] = value
    return env


def read_tabs(path):
    """KEY<TAB>VALUE lines (*.meta) as a dict."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            out[key] = value
    return out


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_manifest(data_dir):
    """MANIFEST.tsv of bench/data/build.sh: {name: row dict}, in file order."""
    path = os.path.join(data_dir, "MANIFEST.tsv")
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return {r["name"]: r for r in rows}


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path, fields, rows):
    """Writes rows (dicts) through a temporary file and a rename."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: fmt(r.get(k, "")) for k in fields})
    os.replace(tmp, path)


def fmt(v):
    """CSV cell: floats with 6 significant digits, the rest as is."""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def read_paper(path):
    """bench/lib/paper.tsv: a list of dicts (one per category x data set),
    comments skipped."""
    rows = []
    keys = ["category", "paper_saved_percent", "paper_data", "data_set", "note"]
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            rows.append(dict(zip(keys, line.rstrip("\n").split("\t"))))
    return rows
