#!/usr/bin/env python3
"""Checks the JSON that `test_stats json DIR` wrote (DIR/json/stats.json).

Strict parse (no NaN / Infinity, no duplicate keys), the documented keys and
types, and the figures test_stats.c put into the registry."""
import json
import math
import sys

MiB = 1 << 20

REGION_KEYS = {
    "id": int, "name": str, "base": str, "bytes": int, "tensor_bytes": int,
    "tensors": int, "tensors_compressed": int, "chunk_bytes": int,
    "threshold": (int, float), "clusters": int, "compressed_bytes": int,
    "metadata_bytes": int, "saved_fraction": (int, float), "stage": str,
    "stage_pick": str, "stage_clusters": int, "state": str,
    "retired": bool, "tracker": str, "mode": str, "copies_served": int, "copies_passthrough": int,
    "copies_fallback": int, "copies_gated": int, "bytes_requested": int,
    "bytes_read_pcie": int, "compress_seconds": (int, float),
    "write_faults": int, "dirty_tensors": int, "tensors_recompressed": int,
    "bytes_gated": int, "bytes_passthrough": int,
    "modelled_seconds_saved": (int, float), "copies_not_ready": int,
    "copies_batched": int, "batch_launches": int, "copies_staged": int,
    "copies_timed": int, "copies_explored": int, "copies_explored_part": int,
    "staged_decodes_timed": int, "staged_decode_seconds": (int, float),
    "staged_decode_model_seconds": (int, float),
    "prepare_peak_bytes": int, "first_chunk_seconds": (int, float),
    "ready_seconds": (int, float), "routes": dict,
    "copies_compact_driver": int, "compact_seconds_cost": (int, float),
    "scan_calls": int, "sync_faults": int, "mode_switches": int,
    "pages_released": int, "pages_rebuilt": int,
    "host_resident_bytes": int, "host_pinned_bytes": int,
    "release_seconds": (int, float), "copies_split": int, "passed": dict,
}
TOTAL_KEYS = {
    "regions": int, "bytes": int, "stored_bytes": int,
    "saved_fraction": (int, float), "copies_served": int,
    "copies_passthrough": int, "copies_fallback": int, "copies_gated": int,
    "bytes_requested": int, "bytes_read_pcie": int,
    "pcie_saved_fraction": (int, float), "compress_seconds": (int, float),
    "write_faults": int, "dirty_tensors": int, "tensors_recompressed": int,
    "bytes_gated": int, "bytes_passthrough": int,
    "modelled_seconds_saved": (int, float), "copies_not_ready": int,
    "copies_batched": int, "batch_launches": int, "copies_staged": int,
    "copies_timed": int, "copies_explored": int, "copies_explored_part": int,
    "staged_decodes_timed": int, "staged_decode_seconds": (int, float),
    "staged_decode_model_seconds": (int, float),
    "prepare_peak_bytes": int, "first_chunk_seconds": (int, float),
    "ready_seconds": (int, float),
    "copies_compact_driver": int, "compact_seconds_cost": (int, float),
    "scan_calls": int, "sync_faults": int, "mode_switches": int,
    "pages_released": int, "pages_rebuilt": int,
    "host_resident_bytes": int, "host_pinned_bytes": int,
    "release_seconds": (int, float), "copies_split": int, "passed": dict,
}

# The figures of test_stats.c's `regions` table, in registration order.
EXPECT = [
    dict(id=1, name="gone", base="0x100000000000", bytes=8 * MiB,
         tensor_bytes=4096, tensors=2048, chunk_bytes=4, threshold=0.75,
         clusters=1, compressed_bytes=2 * MiB, saved_fraction=0.75,
         stage="none", stage_pick="time", stage_clusters=0, state="ready",
         retired=True, tracker="mprotect", copies_served=10, copies_passthrough=2,
         copies_fallback=1, bytes_requested=10 * MiB,
         bytes_read_pcie=3 * MiB, compress_seconds=1.5, write_faults=3,
         dirty_tensors=4, tensors_recompressed=6),
    dict(id=2, name="emb", base="0x200000000000", bytes=64 * MiB,
         tensor_bytes=1024, tensors=65536, chunk_bytes=2, threshold=0.875,
         clusters=1, compressed_bytes=48 * MiB, saved_fraction=0.25,
         stage="exp", stage_pick="exp", stage_clusters=1, state="ready",
         retired=False, tracker="userfaultfd", copies_served=100, copies_passthrough=0,
         bytes_requested=640 * MiB, bytes_read_pcie=480 * MiB,
         compress_seconds=0.25),
    dict(id=3, name="region@0x300000000000", bytes=1 * MiB,
         tensor_bytes=4096, tensors=0, chunk_bytes=0, threshold=0,
         clusters=0, saved_fraction=0, stage="none", stage_pick="untried",
         stage_clusters=0, state="candidate", retired=False, tracker="none",
         copies_passthrough=5, bytes_requested=5 * MiB,
         bytes_read_pcie=5 * MiB, compress_seconds=0),
    # still compressing at exit: reported as not compressed
    dict(id=4, name="we\"ird\\na\tme\x01", bytes=2 * MiB, tensor_bytes=512,
         tensors=0, chunk_bytes=0, threshold=0, saved_fraction=0,
         stage="none", stage_pick="untried", stage_clusters=0,
         state="compressing", tracker="none", copies_passthrough=7),
]
TOTALS = dict(regions=4, bytes=75 * MiB, stored_bytes=53 * MiB,
              saved_fraction=1 - 53 / 75, copies_served=110,
              copies_passthrough=14, copies_fallback=1,
              bytes_requested=655 * MiB, bytes_read_pcie=488 * MiB,
              pcie_saved_fraction=1 - 488 / 655, compress_seconds=1.75,
              write_faults=3, dirty_tensors=4, tensors_recompressed=6)

errors = []


def fail(msg):
    errors.append(msg)


def no_constant(name):
    raise ValueError("non-finite number %s in JSON" % name)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in %r" % keys)
    return dict(pairs)


def check_types(where, obj, keys):
    if set(obj) != set(keys):
        fail("%s: keys %s, want %s" % (where, sorted(obj), sorted(keys)))
    for k, t in keys.items():
        v = obj.get(k)
        # bool is an int in Python: only "retired" may be one
        if not isinstance(v, t) or (isinstance(v, bool) and t is not bool):
            fail("%s.%s = %r is not %s" % (where, k, v, t))
        elif isinstance(v, float) and not math.isfinite(v):
            fail("%s.%s = %r" % (where, k, v))


def check_values(where, obj, want):
    for k, v in want.items():
        got = obj.get(k)
        if isinstance(v, float) or isinstance(got, float):
            ok = isinstance(got, (int, float)) and abs(got - v) <= 1e-12
        else:
            ok = got == v and type(got) is type(v)
        if not ok:
            fail("%s.%s = %r, want %r" % (where, k, got, v))


DEVICE_KEYS = {"device": int, "profile": str, "decoder_build": str,
               "decode_measured": bool}


def check_decoder(dec):
    """test_stats.c's MIXED_NOTES: devices 0 and 5 unmeasured, 2 measured
    (its decoder_build the running build)."""
    check_types("decoder", dec, {"build": str, "devices": list})
    devices = dec.get("devices", [])
    for i, d in enumerate(devices):
        check_types("decoder.devices[%d]" % i, d, DEVICE_KEYS)
        if d.get("decode_measured") != (d.get("decoder_build") == dec.get("build")):
            fail("decoder.devices[%d]: decode_measured %r against builds %r, %r"
                 % (i, d.get("decode_measured"), d.get("decoder_build"),
                    dec.get("build")))
    if [d.get("device") for d in devices] != [0, 2, 5]:
        fail("decoder.devices: %r" % devices)
    if [d.get("decode_measured") for d in devices] != [False, True, False]:
        fail("decoder.devices: %r" % devices)


def main(path):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("ascii")  # everything outside ASCII is escaped
    doc = json.loads(text, parse_constant=no_constant,
                     object_pairs_hook=no_duplicates)
    if set(doc) != {"version", "decoder", "regions", "totals"}:
        fail("top-level keys %s" % sorted(doc))
    check_decoder(doc.get("decoder", {}))
    if doc.get("version") != 1:
        fail("version %r" % doc.get("version"))
    regions = doc.get("regions", [])
    if len(regions) != len(EXPECT):
        fail("%d regions, want %d" % (len(regions), len(EXPECT)))
    for i, (r, want) in enumerate(zip(regions, EXPECT)):
        where = "regions[%d]" % i
        check_types(where, r, REGION_KEYS)
        check_values(where, r, want)
    check_types("totals", doc.get("totals", {}), TOTAL_KEYS)
    check_values("totals", doc.get("totals", {}), TOTALS)
    if '"threshold": 0.875,' not in text:
        fail("doubles are not written in their shortest form")
    for e in errors:
        print("FAIL " + e)
    if not errors:
        print("check_stats: %s ok (%d regions)" % (path, len(regions)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
