"""results_md.py summary OUT            -- OUT/summary.md on stdout
   results_md.py results OUT IMG_DIR    -- docs/RESULTS.md on stdout

Every figure comes from the files bench/ab wrote into OUT (meta.env,
datasets.csv, codecs.csv, codecs/meta.env, ab.csv) and from
bench/lib/paper.tsv; nothing here is typed in by hand.  IMG_DIR is where
the page finds the PNG files, relative to it."""

import os
import sys

from benchlib import read_csv, read_env, read_paper

HERE = os.path.dirname(os.path.abspath(__file__))


def pct(x, digits=1):
    return "" if x in ("", None) else f"{100 * float(x):.{digits}f} %"


def mb(x):
    return f"{float(x) / 1e6:.2f}"


def num(x, digits=2):
    return "" if x in ("", None) else f"{float(x):.{digits}f}"


def table(header, rows, align):
    """A Markdown table; align: one of 'l'/'r' per column."""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


class Results:
    def __init__(self, out):
        self.out = out
        self.env = read_env(os.path.join(out, "meta.env"))
        self.cenv = read_env(os.path.join(out, "codecs", "meta.env"))
        self.sets = read_csv(os.path.join(out, "datasets.csv"))
        self.codecs = read_csv(os.path.join(out, "codecs.csv"))
        self.ab = read_csv(os.path.join(out, "ab.csv"))
        # bench/paths.sh's comparison, when it ran beside bench/ab
        pdir = os.path.join(os.path.dirname(os.path.abspath(out)), "paths")
        pcsv = os.path.join(pdir, "paths.csv")
        self.paths = read_csv(pcsv) if os.path.exists(pcsv) else []
        self.penv = (read_env(os.path.join(pdir, "auto", "meta.env"))
                     if self.paths else {})
        self.paper = read_paper(os.path.join(HERE, "paper.tsv"))
        self.gpu = self.env.get("backend") == "gpu"
        # bench/gpu_lease.sh runs on real GPUs, kept in the repository
        gdir = os.path.join(os.path.dirname(HERE), "results", "gpu")
        self.leases = []
        if os.path.isdir(gdir):
            for name in sorted(os.listdir(gdir)):
                d = os.path.join(gdir, name)
                if os.path.exists(os.path.join(d, "summary.csv")):
                    self.leases.append((name, read_env(os.path.join(d, "meta.env")),
                                        read_csv(os.path.join(d, "summary.csv")),
                                        d))

    # ------------------------------------------------------- data sets
    @staticmethod
    def generated(s):
        """A generated control (bench/data: random_u8), not real data."""
        return s["package"].startswith("generated")

    def real_sets(self):
        return [s for s in self.sets if not self.generated(s)]

    def saved_of(self, name):
        for s in self.sets:
            if s["name"] == name:
                return float(s["saved_fraction"])
        return None

    def paper_of(self, name):
        cats = [f'{p["category"]} {p["paper_saved_percent"]} %'
                for p in self.paper if p["data_set"] == name]
        return " / ".join(cats)

    def datasets_table(self):
        rows = []
        for s in self.sets:
            rows.append([
                f'`{s["name"]}`', s["dtype"], s["tensor_bytes"], s["rows"],
                mb(s["bytes"]),
                f'{s["package"]} {s["package_version"]}: {s["source_file_in_package"]}',
                pct(s["saved_fraction"]), pct(s["saved_fraction_with_metadata"]),
                f'{s["chunk_bytes"]}, {float(s["threshold"]):.3f}',
                self.paper_of(s["name"]) or "--"])
        return table(["data set", "dtype", "R (B)", "rows", "MB", "source",
                      "ibp saved", "with metadata", "chunk (B), threshold",
                      "paper (closest kind)"], rows, "llrrrlrrll")

    def paper_table(self):
        rows = []
        for p in self.paper:
            saved = self.saved_of(p["data_set"])
            rows.append([p["category"], f'{p["paper_saved_percent"]} %',
                         p["paper_data"], f'`{p["data_set"]}`',
                         pct(saved) if saved is not None else "not built",
                         p["note"]])
        return table(["paper: kind of data", "paper: IBP saved",
                      "paper's data", "here", "ibp saved here", "how it differs"],
                     rows, "lrllrl")

    # ---------------------------------------------------------- codecs
    def codec(self, name, codec, layout):
        for r in self.codecs:
            if (r["data_set"], r["codec"], r["layout"]) == (name, codec, layout):
                return r
        return None

    CODEC_COLS = [("ibp", "row"), ("zstd-1", "row"), ("zstd-3", "row"),
                  ("lz4-1", "row"), ("zstd-1", "file"), ("zstd-3", "file"),
                  ("lz4-1", "file")]

    def codec_names(self):
        seen = []
        for r in self.codecs:
            if r["data_set"] not in seen:
                seen.append(r["data_set"])
        return seen

    def codec_saved_table(self):
        rows = []
        for n in self.codec_names():
            first = self.codec(n, "ibp", "row")
            cells = [f"`{n}`", first["tensor_bytes"], mb(first["bytes"])]
            for c, l in self.CODEC_COLS:
                r = self.codec(n, c, l)
                cells.append(pct(r["saved_fraction"]) if r else "")
            rows.append(cells)
        head = ["data set", "R (B)", "MB"] + [
            f"{c} {'per row' if l == 'row' else 'whole file'}" for c, l in self.CODEC_COLS]
        return table(head, rows, "lrr" + "r" * len(self.CODEC_COLS))

    def codec_speed_table(self):
        rows = []
        for n in self.codec_names():
            cells = [f"`{n}`"]
            for c, l in self.CODEC_COLS:
                r = self.codec(n, c, l)
                cells.append(f'{float(r["compress_mbps"]):.0f} / '
                             f'{float(r["decompress_mbps"]):.0f}' if r else "")
            ibp = self.codec(n, "ibp", "row")
            cells.append(f'{float(ibp["pack_mbps"]):.0f}, {float(ibp["search_s"]):.2f} s')
            rows.append(cells)
        head = ["data set"] + [
            f"{c} {'per row' if l == 'row' else 'whole file'}" for c, l in self.CODEC_COLS
        ] + ["ibp: packing alone, search"]
        return table(head, rows, "l" + "r" * (len(self.CODEC_COLS) + 1))

    def codec_method(self):
        limit = self.cenv.get("limit", "none")
        on = ("whole data sets" if limit == "none" else
              f"the first {limit}iB of each data set (whole rows; the smaller "
              "sets whole)")
        iters = self.cenv.get("iterations", "?")
        timing = ("one timed pass per measurement (`-i0`; `ibp bench --seconds "
                  f'{self.cenv.get("ibp_seconds", "?")}`), so speeds are rough'
                  if iters == "0" else
                  f"the best of repeated passes over at least {iters} s "
                  f'(`-i{iters}`; `ibp bench --seconds {self.cenv.get("ibp_seconds", "?")}`)')
        return (
            f"Measured by `bench/codecs.sh` on {on}, all codecs on the same "
            f"bytes, one core; {timing}.  zstd {self.cenv.get('zstd_version', '?')} "
            f"and lz4 {self.cenv.get('lz4_version', '?')} are Debian's command-line "
            "tools in their benchmark modes.\n\n"
            "- **Per row** (random access, what a copy of one row needs): "
            "`zstd -b1|-b3 -B<R> FILE`, `lz4 -b1 -B<R> FILE` cut the file into "
            "independent blocks of R bytes -- one row each -- and compress each on "
            "its own (a zstd frame with its header, an lz4 block; no dictionary, "
            "no index of where each row starts, which random access would also "
            "need).  ibp is per row by construction: `ibp analyze --json`, space "
            "saved *with* its metadata (Mask, Bitval, one flag bit per row, once "
            "per file).\n"
            "- **Whole file** (no random access: reference only): `zstd -b1|-b3 "
            "FILE`, `lz4 -b1 FILE`.\n"
            "- **Speed**, MB/s = 1e6 B/s of original bytes, compress / decompress.  "
            "ibp's compress figure is everything a region needs -- bit statistics, "
            "threshold and chunk search, packing -- from `ibp bench --threads 1`, "
            "as one rate; the last column gives packing alone and the search time "
            "(paid once per region).  ibp's decompress figure is the CPU reference "
            "decoder; libibp decodes on the GPU, which is not measured here.")

    # -------------------------------------------------------------- A/B
    def profiles(self):
        return [p for p in self.env.get("profiles", "").split(",") if p]

    def ab_of(self, profile):
        return [s for s in self.ab if s["profile"] == profile]

    def lines(self):
        """One ab.csv row per plan line (its first profile)."""
        seen, out = set(), []
        for s in self.ab:
            if s["line"] not in seen:
                seen.add(s["line"])
                out.append(s)
        return out

    def time_word(self):
        return "measured" if self.gpu else "modelled"

    def gate_cell(self, s):
        cell = (f'{int(float(s["copies_served"]))} / {int(float(s["copies_gated"]))} / '
                f'{int(float(s["copies_passthrough"]))} / {int(float(s["copies_fallback"]))}')
        return cell

    def ab_table(self, profile):
        rows = []
        for s in self.ab_of(profile):
            rows.append([
                s["line"], s["sample"], f'`{s["data"]}`', s["tensor_bytes"],
                num(s["modelled_ms_a"], 3), num(s["modelled_ms_b"], 3),
                f'{pct(s["spread_a"], 0)} / {pct(s["spread_b"], 0)}',
                num(s["speedup"], 3), pct(s["region_saved"]),
                num(s["ideal"], 3), num(s["speedup_vs_ideal"], 3),
                mb(s["bytes_a"]), mb(s["bytes_b"]), self.gate_cell(s),
                s["degraded"], self.host_cell(s)])
        w = self.time_word()
        head = ["#", "sample", "data", "R (B)", f"ms A ({w})", f"ms B ({w})",
                "spread of runs A / B", "speedup A/B", "region saved", "ideal 1/(1-saved)",
                "speedup / ideal", "MB over PCIe A", "MB over PCIe B",
                "copies served / gated / passed / fell back", "degraded",
                "host memory B / region"]
        return table(head, rows, "rllr" + "r" * 10 + "lr")

    @staticmethod
    def host_cell(s):
        """B's host memory for its regions once prepared, over their bytes
        (an ordinary region: its pinned bytes and the shadow; compact: the
        shadow and what was not released); - where the stats lack it."""
        try:
            host = float(s.get("host_bytes_b", ""))
            region = float(s["region_bytes_b"])
        except (TypeError, ValueError, KeyError):
            return "-"
        return f"{host / region:.3f}" if host > 0 and region > 0 else "-"

    @staticmethod
    def compact_line(s):
        """A mode=compact line: it trades copy time for host memory by
        design (docs/CONFIG.md), so the speed rule does not apply to it."""
        return "mode=compact" in s.get("regions", "")

    def acceptance(self, profile):
        """(holds, worst row) of the rule: no line more than 2 % slower
        (mode=compact lines apart)."""
        rows = [s for s in self.ab_of(profile) if s["speedup"] not in ("", None)
                and not self.compact_line(s)]
        if not rows:
            return None, None
        worst = min(rows, key=lambda s: float(s["speedup"]))
        return all(s["slower_over_2pct"] == "no" for s in rows), worst

    def acceptance_lines(self):
        w = self.time_word()
        out = [f"Acceptance (issue G): under every profile, no line {w} slower "
               "with libibp than without by more than 2 % (reported, never a "
               "failure of the benchmark):"]
        for p in self.profiles():
            holds, worst = self.acceptance(p)
            if worst is None:
                out.append(f"- `{p}`: no line")
                continue
            slow = [s["line"] for s in self.ab_of(p)
                    if s["slower_over_2pct"] != "no" and not self.compact_line(s)]
            ratio = float(worst["modelled_ms_b"]) / float(worst["modelled_ms_a"])
            out.append(
                f"- `{p}`: **{'holds' if holds else 'does not hold'}**; worst "
                f"speedup {num(worst['speedup'], 3)} (line {worst['line']}, "
                f"{worst['sample']} on `{worst['data']}`: B takes "
                f"{100 * (ratio - 1):+.1f} % of A's time)"
                + (f"; over 2 % slower: lines {', '.join(slow)}" if slow else ""))
        compact = [s for s in self.ab if self.compact_line(s)
                   and s["speedup"] not in ("", None)]
        if compact:
            cells = ", ".join(
                f'{s["line"]} {s["sample"]} `{s["profile"]}` '
                f'{num(s["speedup"], 3)} (host memory {self.host_cell(s)} of the region)'
                for s in compact)
            out.append(
                "- `mode=compact` lines, which trade copy time for host memory "
                "by design (docs/CONFIG.md) and are not under the rule: "
                f"speedup {cells}")
        return "\n".join(out)

    def ab_tables(self, img=None):
        parts = [f"<!-- acceptance -->\n{self.acceptance_lines()}\n<!-- /acceptance -->"]
        for p in self.profiles():
            parts += [f"### Profile `{p}`", self.ab_table(p)]
        if img is not None:
            parts += [f"![{self.time_word()} speedup vs space saved]({img}/ab_speedup.png)",
                      f"![bytes over PCIe, A vs B]({img}/ab_bytes.png)"]
        return "\n\n".join(parts)

    def ab_commands(self):
        rows = [[s["line"], s["sample"], f'`{s["data"]}`',
                 f'`{s["regions"]}`' + (f' `{s["env"]}`' if s.get("env") else ""),
                 f'`{s["args"]}`'] for s in self.lines()]
        return table(["#", "sample", "data", "IBP_REGIONS (B) [and environment]",
                      "arguments (A and B)"], rows, "rllll")

    def profile_list(self):
        specs = self.env.get("profile_specs", "").split(",")
        out = []
        for label, spec in zip(self.profiles(), specs):
            out.append(f"`{label}`" + ("" if spec == label else f" (`{spec}`)"))
        return ", ".join(out)

    def ab_method(self):
        n = self.env.get("runs", "?")
        common = (
            f"`bench/ab` runs every line of `bench/lib/ab_plan.tsv` under each "
            f"device cost profile ({self.profile_list()}; docs/PROFILE.md), {n} "
            "times without (A: `ibp run --disable`, libibp loaded and off) and "
            "with libibp (B: `ibp run --regions ... --stats FILE` with "
            "`IBP_WAIT_READY=1`, so the first copy waits for the compression), "
            "alternating A and B, with `IBP_PROFILE` set to the profile for both.  "
            "The result lines (bytes, copies, FNV-1a checksum of every byte that "
            "reached the device) of A and B, of every run and every profile are "
            "identical -- the bench stops on any difference.  Data: data sets of "
            "`bench/data` (`NAME:SIZE` = their first SIZE bytes, whole rows; "
            "`random_u8` is the incompressible control) or the sample's generated "
            "data (`gen_*`).\n\n"
            "- **ms A, ms B**: the samples' own CUDA event timing of their copies "
            "after the warm-up pass (`h2d_seconds`), median of the runs; "
            "speedup = ms A / ms B; *spread*: (max - min) / median of the runs.\n"
            "- **What the gate chose** (libibp's statistics, median of the B runs): "
            "copies *served* by the decompress kernel; *gated*: left to the "
            "driver's copy because the profile models that faster; *passed*: "
            "passed through (e.g. a region the gate demoted because its tensor "
            "size does not fit its copies: *degraded*); *fell back*: the kernel "
            "path failed and the copy ran.\n"
            "- **Region saved** is libibp's `saved_fraction` of the region, and "
            "*ideal* the speedup that would give: 1/(1 - saved).\n"
            "- **MB over PCIe**: A = every byte the sample copies; B = libibp's "
            "`bytes_read_pcie` for the copies it served (the stored bytes of every "
            "tensor a copy touches, before real reads round up to 32-byte sectors) "
            "plus the bytes of the copies left to the driver.  The one-time upload "
            "of the region's metadata is not in B (`metadata_bytes` in `ab.csv`).  "
            "The warm-up pass is counted in both.\n"
            "- **Host memory B / region**: the host memory of B's regions once "
            "prepared, over their bytes (libibp's `host_pinned_bytes`, plus "
            "`host_resident_bytes` for a compact region; docs/CONFIG.md): an "
            "ordinary region keeps its own pinned bytes and the shadow, a "
            "`mode=compact` one the shadow and the pages not released.  A keeps "
            "1.000 (the region's pinned bytes).")
        if self.gpu:
            return common + (
                f"\n\nOn the GPU ({self.env.get('gpu', '?')}) the times are "
                "**measured**.  The profile only steers libibp's gate there; A is "
                "the same under every profile.")
        return common + (
            "\n\n**No GPU here: the runs are on the simulated GPU** (`tests/sim`: "
            "the real decompress kernel compiled for a CPU SIMT emulator).  The "
            "times are **modelled**: the simulated driver's virtual clock charges "
            "every copy, launch and API call its cost on the profile "
            "(docs/PROFILE.md, \"The model\"), with the kernel's host reads taken "
            "from the emulator's sector counts, and CUDA events read that clock.  "
            "The emulator's own speed is never reported.  A and B are modelled by "
            "the same clock, so per-call costs count on both sides.  Two streams' "
            "copies share the modelled PCIe link in the order the simulator runs "
            "them, so a pass of `weight_stream` varies by a few percent from run "
            "to run (the spread column; its lines time 4 passes).")

    # ----------------------------------------------------------- pages
    def machine(self):
        e = self.env
        rows = [["command", f'`{e.get("command", "?")}` ({e.get("mode", "?")} mode, '
                 f'{e.get("seconds", "?")} s in all)'],
                ["date", e.get("date", "?")],
                ["commit", e.get("commit", "?")],
                ["backend", "real GPU: " + e.get("gpu", "?") if self.gpu else
                 "simulated GPU (tests/sim), no GPU on this machine"],
                ["machine", f'{e.get("uname", "?")}; {e.get("os", "?")}'],
                ["CPU", f'{e.get("cpu", "?")}, {e.get("cores", "?")} cores, '
                 f'{e.get("memory", "?")}'],
                ["tools", f'zstd {self.cenv.get("zstd_version", "?")}, '
                 f'lz4 {self.cenv.get("lz4_version", "?")}']]
        if e.get("skipped"):
            rows.append(["samples not in this tree", e["skipped"]])
        return table(["", ""], rows, "ll")

    def key_figures(self):
        lines = []
        real = self.real_sets()
        if real:
            lo = min(real, key=lambda s: float(s["saved_fraction"]))
            hi = max(real, key=lambda s: float(s["saved_fraction"]))
            lines.append(
                f"- IBP saves {pct(lo['saved_fraction'])} (`{lo['name']}`) to "
                f"{pct(hi['saved_fraction'])} (`{hi['name']}`) on the "
                f"{len(real)} real data sets (`ibp analyze`, whole files)"
                + "".join(f"; {pct(g['saved_fraction'])} on the generated control `{g['name']}`"
                          for g in self.sets if self.generated(g)) + ".")
        cats = []
        for p in self.paper:
            if p["category"] not in cats:
                cats.append(p["category"])
        for c in cats:
            ps = [p for p in self.paper if p["category"] == c]
            here = ", ".join(f'`{p["data_set"]}` {pct(self.saved_of(p["data_set"]))}'
                             for p in ps if self.saved_of(p["data_set"]) is not None)
            lines.append(f"- Paper, {c}: IBP saves {ps[0]['paper_saved_percent']} %; "
                         f"here, closest kind of data: {here or 'not built'}.")
        gen = {s["name"] for s in self.sets if self.generated(s)}
        names = [n for n in self.codec_names() if n not in gen]
        if names:
            wins = [n for n in names if float(self.codec(n, "ibp", "row")["saved_fraction"]) >
                    max(float(self.codec(n, c, "row")["saved_fraction"])
                        for c in ("zstd-1", "zstd-3", "lz4-1"))]
            lines.append(
                f"- Per row (random access), IBP saves more than zstd -1, zstd -3 and "
                f"lz4 on {len(wins)} of {len(names)} real data sets "
                f"({', '.join(f'`{n}`' for n in wins)}); zstd or lz4 saves as much or more on the others.")
        if self.ab:
            w = self.time_word()
            where = (f"on the GPU ({self.env.get('gpu', '?')})" if self.gpu else
                     "on the **simulated GPU** (no GPU here; times modelled by its "
                     "virtual clock)")
            lines.append(f"- A/B {where}, outputs identical in A and B; {w} "
                         "speedup A/B (ideal 1/(1-saved)) per profile:")
            for s in self.lines():
                per = "; ".join(
                    f"{x['profile']} {num(x['speedup'], 3)}"
                    + (" (degraded)" if x["degraded"] != "no" else "")
                    for x in self.ab if x["line"] == s["line"])
                lines.append(f"  - {s['line']} {s['sample']} on `{s['data']}`"
                             f" (`{s['regions']}`"
                             + (f", `{s['env']}`" if s.get("env") else "")
                             + f"): {per} (ideal {num(s['ideal'], 3)})")
            for p in self.profiles():
                holds, worst = self.acceptance(p)
                if worst is not None:
                    lines.append(
                        f"- No line more than 2 % slower with libibp on `{p}`: "
                        f"**{'holds' if holds else 'does not hold'}** (worst speedup "
                        f"{num(worst['speedup'], 3)}, line {worst['line']}).")
        if self.paths:
            holds, worst = self.paths_verdict()
            lines.append(
                f"- The gate's choice within 2 % of the better of its two GPU paths "
                f"(zero-copy, staged) on every line (`{self.paths_command()}`, "
                f"section 3): **{'holds' if holds else 'does not hold'}** (worst "
                f"{num(worst['gate_vs_best'], 4)}, line {worst['line']} of that run).")
        if self.leases:
            name, env, rows, _ = self.leases[-1]
            figs = "; ".join(f"{r['line']} {r['speedup']}" for r in rows)
            same = all(r["outputs_match"] == "yes" for l in self.leases for r in l[2])
            lines.append(
                f"- On a real GPU (section 4; {len(self.leases)} runs of "
                f"`bench/gpu_lease.sh`, outputs "
                f"{'identical in A and B on every line' if same else '**different** somewhere'}), "
                f"the latest ({name}, {env.get('gpu', '?').split(',')[0]}, commit "
                f"{env.get('commit', '?')}), measured A/B: {figs}.")
        return "\n".join(lines)

    # ------------------------------------------------ bench/paths.sh
    def paths_verdict(self):
        """(holds, worst row) of the gate against the better GPU path."""
        worst = min(self.paths, key=lambda r: float(r["gate_vs_best"]))
        return all(r["within_2pct"] == "yes" for r in self.paths), worst

    def paths_command(self):
        runs = self.penv.get("runs", "?")
        profs = self.penv.get("profiles", "?")
        return f"bash bench/paths.sh --runs {runs} --profiles {profs}"

    def paths_section(self):
        if not self.paths:
            return ("Not run: `bash bench/paths.sh` (bench/README.md) writes "
                    "`build/paths/paths.csv`, which this section then shows.")
        holds, worst = self.paths_verdict()
        rows = [[r["line"], r["sample"],
                 f"`{r['data']}`" + (f" `{r['env']}`" if r["env"] else ""),
                 r["profile"], num(r["modelled_ms_a"], 3),
                 num(r["modelled_ms_b_auto"], 3), num(r["modelled_ms_b_zerocopy"], 3),
                 num(r["modelled_ms_b_staged"], 3), r["best_path"],
                 num(r["gate_vs_best"], 4), r["within_2pct"],
                 f"{r['copies_served_auto']}/{r['copies_staged_auto']}"]
                for r in self.paths]
        return "\n".join([
            f"`{self.paths_command()}` ({self.penv.get('date', '?')}, commit "
            f"{self.penv.get('commit', '?')}) runs every line of the plan three "
            "times, with `IBP_PATH=auto` (the gate chooses per copy), `zerocopy` "
            "and `staged` (the gate restricted to that GPU path; the driver's copy "
            "and batched launches stay open), median of the runs.  *auto vs best*: "
            "the better restricted path's time over auto's (below 1: auto slower); "
            "the rule: auto within 2 % of the better path on every line.  Lines "
            "whose copies are all batched launches or left to the driver run the "
            "same way under all three, and differ by the runs' own spread only.",
            "",
            table(["#", "sample", "data", "profile", "ms A", "ms auto",
                   "ms zerocopy", "ms staged", "best", "auto vs best", "within 2 %",
                   "served/staged (auto)"], rows,
                  ["l", "l", "l", "l", "r", "r", "r", "r", "l", "r", "l", "r"]),
            "",
            f"The gate within 2 % of the better path on every line: "
            f"**{'holds' if holds else 'does not hold'}** (worst: line "
            f"{worst['line']}, {worst['sample']} on `{worst['data']}`, "
            f"{num(worst['gate_vs_best'], 4)})."])

    # ---------------------------------------- bench/gpu_lease.sh runs
    @staticmethod
    def decode_note(d):
        """The '# decode:' line ibp calibrate wrote in the run's profile."""
        try:
            with open(os.path.join(d, "profile.txt")) as f:
                for line in f:
                    if line.startswith("# decode"):
                        return line[2:].strip()
        except OSError:
            pass
        return ""

    def leases_section(self):
        if not self.leases:
            return ("None: `bash bench/gpu_lease.sh` on a machine with a GPU "
                    "writes its results, which belong in `bench/results/gpu/`.")
        parts = [
            "Measured, not modelled: each sample's own CUDA event timing of its "
            "copies, A (libibp loaded, disabled) against B (libibp serving, its "
            "gate steered by the GPU's profile from `ibp calibrate`), median of "
            "the runs; every run's result line (bytes, copies, checksum) was "
            "compared between A and B, and every sample checks the bytes on the "
            "device itself.  Kept in `bench/results/gpu/<run>/` (the lines' "
            "arguments: `lease.log` and `bench/gpu_lease.sh` at the commit named). "
            "Lines named `*_staged`, `*_zerocopy` force one GPU path under the "
            "built-in h100-pcie5.  *served / staged / batched / gated*: what "
            "libibp did with B's copies (first run)."]
        for name, env, rows, d in self.leases:
            parts += ["", f"**{name}** -- {env.get('gpu', '?')}; commit "
                      f"{env.get('commit', '?')}; {env.get('date', '?')}; "
                      f"`{env.get('command', '?')}`; B's profile: "
                      f"{env.get('profile', '?')}."]
            if env.get("note"):
                parts += ["", f"({env['note']}.)"]
            note = self.decode_note(d)
            if note:
                parts += ["", f"`ibp calibrate`: {note}."]
            parts += ["", table(
                ["line", "runs", "ms A", "ms B", "A/B", "outputs", "served",
                 "staged", "batched", "gated"],
                [[r["line"], r["runs"], r["a_ms"], r["b_ms"], f"**{r['speedup']}**",
                  "same" if r["outputs_match"] == "yes" else "**differ**",
                  r["copies_served"], r["copies_staged"], r["copies_batched"],
                  r["copies_gated"]] for r in rows],
                ["l", "r", "r", "r", "r", "l", "r", "r", "r", "r"])]
        return "\n".join(parts)

    def not_measured(self):
        if self.gpu:
            return ("- PCIe traffic of real reads: B counts libibp's "
                    "`bytes_read_pcie`, before sector rounding.")
        return (
            "The machine that ran sections 1-3 has no GPU (`nvidia-smi` finds "
            "none), so:\n\n"
            "- **GPU time was not measured there**: every time of sections 1-3 "
            "is modelled by the simulated GPU's virtual clock from a device "
            "cost profile (docs/PROFILE.md), whose values are partly measured "
            "(on an H200), partly published figures and partly marked "
            "assumptions.  Section 4 is measured on a real GPU, and there the "
            "end-to-end target (bench/README.md, \"Targets\": transfer speedup "
            ">= 0.95 x 1/(1-saved) at >= 1 KB tensors) is **not met**: the "
            "compressed paths gain little on bulk copies and lose on some "
            "(2026-12-04-h200-3: weight_gen_bf16 1.077, kv_prefix 0.932, "
            "weight_random 0.879, kv_window 0.620, kv_blocks 0.638), and "
            "only batched row gathers win (3.1-4.4).\n"
            "- **Real PCIe** was not measured: bandwidth, latency, the cost of "
            "GPU-initiated zero-copy reads against DMA copies.  The model reads "
            "these from the profile; the emulator counts the sectors the kernel "
            "reads (`build/release/tests/sim/kernels/bench_pcie`, bench/README.md).\n"
            "- On a machine with a GPU, `bash bench/gpu.sh` measures these "
            "(bench/README.md, \"On a GPU\"); `bash bench/gpu_lease.sh` does "
            "what fits a short loan of one (section 4).")

    def results_page(self, img):
        e = self.env
        regen = "bench/ab --quick" if e.get("mode") == "quick" else "bench/ab"
        parts = [
            "# libibp: results",
            "",
            f"<!-- Generated by bench/results.sh from the output of `{e.get('command')}`."
            " Do not edit by hand: rerun the command. -->",
            "",
            f"**Generated** by `{e.get('command')}` on {e.get('date')} at commit "
            f"{e.get('commit')}, through `bench/results.sh`, from the "
            "CSV files it wrote (`build/ab/*.csv`).  No figure on this page is "
            "typed in by hand.  To regenerate it on a fresh clone (Debian 12, "
            "root for `apt-get`; the data sets come from Debian and npm packages):",
            "",
            "```sh",
            f"{'bash bench/data/build.sh':<26}# the data sets (bench/ab also builds missing ones)",
            f"{regen:<26}# this page, docs/results/*.png, build/ab/*.csv",
            "```",
            "",
            "## Key figures",
            "",
            self.key_figures(),
            "",
            "## 1. Data sets and the paper",
            "",
            "Real data sets built by `bench/data/build.sh` from Debian and npm "
            "packages (provenance and licences: `MANIFEST.tsv`, "
            "bench/data/README.md), and one generated control, `random_u8` "
            "(seeded random bytes: nothing to save).  *ibp saved* is `ibp analyze FILE "
            "--tensor-bytes R --json` on the whole file: `saved_fraction` "
            "(1 - stored bytes / bytes), and `saved_fraction_with_metadata`.",
            "",
            self.datasets_table(),
            "",
            "The IBP paper reports (its Table 2) these savings on its own data "
            "sets, which are not in any package; the closest data sets here, by "
            "kind of data (`bench/lib/paper.tsv`):",
            "",
            self.paper_table(),
            "",
            "## 2. Codec comparison",
            "",
            self.codec_method(),
            "",
            "Space saved (negative: the output is larger):",
            "",
            self.codec_saved_table(),
            "",
            "Speed, MB/s compress / decompress, one core:",
            "",
            self.codec_speed_table(),
            "",
            f"![space saved per codec]({img}/codecs_saved.png)",
            "",
            "## 3. A/B: the samples with and without libibp",
            "",
            self.ab_method(),
            "",
            self.ab_tables(img),
            "",
            "How each line ran (`bench/lib/ab_plan.tsv`; `{file}`, `{R}`, `{bytes}` "
            "filled in):",
            "",
            self.ab_commands(),
            "",
            "### Which GPU path the gate picks",
            "",
            self.paths_section(),
            "",
            "## 4. On a real GPU",
            "",
            self.leases_section(),
            "",
            "## 5. What could not be measured here",
            "",
            self.not_measured(),
            "",
            "## 6. Machine",
            "",
            self.machine(),
            ""]
        return "\n".join(parts)

    def summary_page(self):
        return "\n".join([
            f"# bench/ab summary ({self.env.get('mode')}, "
            f"{'real GPU' if self.gpu else 'simulated GPU'})", "",
            self.key_figures(), "", self.ab_tables("."), "",
            self.ab_commands(), "",
            self.codec_saved_table(), "", "![codecs](codecs_saved.png)", "",
            self.machine(), ""])


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("summary", "results"):
        sys.exit(__doc__)
    r = Results(sys.argv[2])
    if sys.argv[1] == "summary":
        sys.stdout.write(r.summary_page())
    else:
        sys.stdout.write(r.results_page(sys.argv[3] if len(sys.argv) > 3 else "results"))


if __name__ == "__main__":
    main()
