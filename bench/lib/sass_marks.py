#!/usr/bin/env python3
"""The all-in static count of the decompress kernel (bench/kernel_sass.sh,
docs/ARCHITECTURE.md "Counting a tensor's instructions").

  sass_marks.py regions KERNEL LISTING
      Reads nvdisasm -hex's listing of a cubin built with
      -DIBP_KERNEL_SASS_MARKS, where every IBP_MARK(id) of the source is one
      PMTRIG instruction carrying id.  The code of a mark is every
      instruction reachable from it without passing another mark (a
      subroutine CALL counts the callee's instructions); it must hold no
      loop (an unmarked loop would be counted once however often it runs:
      the script fails).  Counting every instruction of it once is an upper
      bound for one pass: branches not taken count as taken.  A mark that
      the compiler copied (inlined at several places, unrolled) counts as
      its largest copy.  The code before the first mark is the kernel's
      entry (id 0).  Prints `mark=ID sites=N instructions=I` per id.

  sass_marks.py combine REGIONS HITS
      HITS: the emulator's run of the same source (tests/sim/kernels/
      count_marks): lines `case size=R width=W bytes=B` followed by
      `hits mark=ID warp_passes=P` (per warp, the most passes of any of its
      lanes, summed over the warps).  Prints per case
      `size=R width=W instructions_per_byte_all_in=X`, X = sum of P x I
      over the marks (the entry with MARK_ENTRY's passes) / B, and with
      --detail the marks' shares.  A case of a region with a coding stage
      (`case stage=S dtype=D size=R ...`) prints `stage=S dtype=D ` first.

The divergent fallback of the warp collectives (BRA.DIV's target) is left
out: a warp on the decode path is converged."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_loop  # noqa: E402  (the listing parser, shared)

TARGET = re.compile(r"`\(([^)]+)\)")

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "kernels", "ibp_decompress.cu")
BLOCK_R = 16384  # IBP_KERNEL_BLOCK_R: the block path from here on


def mark_names():
    """The marks' ids by name, from the enum in the kernel's source."""
    src = open(SOURCE).read()
    body = src[src.index("MARK_ENTRY = 1"):]
    body = body[:body.index("}")]
    names = re.findall(r"\b(MARK_[A-Z0-9_]+)\b", re.sub(r"/\*.*?\*/", "", body,
                                                    flags=re.S))
    return {n: i + 1 for i, n in enumerate(names)}


def parse(lines, function):
    """[text, low word] per instruction of the function's section and the
    instruction index of each label in it (sass_loop.parse_all)."""
    labels = {}
    return sass_loop.parse_all(lines, function, labels), labels


def opcode(text):
    words = text.split()
    return words[1] if words[0].startswith("@") else words[0]


def predicated(text):
    return text.split()[0].startswith("@")


def branch_target(index, low):
    imm = ((low >> 16) & 0xFF) | ((low >> 34) << 8)
    if low >> 63:
        imm -= 1 << 38
    return index + 1 + (imm * 4) // 16


def successors(insns, labels, i):
    text, low = insns[i]
    op = opcode(text)
    if op.startswith("BRA.DIV"):
        return [i + 1]  # the divergent fallback: not on a converged path
    if op.startswith("BRX") or op.startswith("JMX") or op.startswith("JMP"):
        sys.exit("sass_marks: indirect jump at %d: %s" % (i, text))
    if op.startswith("BRA"):
        t = branch_target(i, low)
        return [i + 1, t] if predicated(text) else [t]
    if op.startswith("EXIT") or op.startswith("RET"):
        return [i + 1] if predicated(text) else []
    return [i + 1]


def callee(insns, labels, i):
    m = TARGET.search(insns[i][0])
    if not m or m.group(1) not in labels:
        sys.exit("sass_marks: call without a known target: %s" % insns[i][0])
    return labels[m.group(1)]


def is_mark(insns, i):
    return opcode(insns[i][0]) == "PMTRIG"


def mark_id(insns, i):
    return int(insns[i][0].split()[-1], 0)


def region(insns, labels, start, stop_at_marks=True):
    """Instructions reachable from `start` (inclusive) without entering a
    mark; fails on a cycle among them."""
    seen, stack = set(), [start]
    while stack:
        i = stack.pop()
        if i in seen or i >= len(insns):
            continue
        if stop_at_marks and i != start and is_mark(insns, i):
            continue
        seen.add(i)
        for s in successors(insns, labels, i):
            if s != start:  # back at the mark: its next pass
                stack.append(s)
    # cycle check: Kahn's algorithm on the induced subgraph
    indeg = {i: 0 for i in seen}
    for i in seen:
        for s in successors(insns, labels, i):
            if s in seen and s != start:
                indeg[s] += 1
    ready = [i for i in seen if indeg[i] == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for s in successors(insns, labels, i):
            if s in seen and s != start:
                indeg[s] -= 1
                if indeg[s] == 0:
                    ready.append(s)
    if done != len(seen):
        left = sorted(i for i in seen if indeg[i] > 0)
        sys.exit("sass_marks: an unmarked loop after the mark at %#x "
                 "(instructions %#x..%#x)" % (16 * start, 16 * left[0],
                                              16 * left[-1]))
    return seen


def cost(insns, labels, seen, sizes):
    n = 0
    for i in seen:
        if is_mark(insns, i):
            continue
        n += 1
        if opcode(insns[i][0]).startswith("CALL"):
            t = callee(insns, labels, i)
            if t not in sizes:
                sizes[t] = cost(insns, labels, region(insns, labels, t, False),
                                sizes)
            n += sizes[t]
    return n


def regions(function, path):
    insns, labels = parse(open(path).read().splitlines(), function)
    if not insns:
        sys.exit("sass_marks: no function %s in %s" % (function, path))
    sizes = {}
    each = {0: [cost(insns, labels, region(insns, labels, 0), sizes)]}
    for i in range(len(insns)):
        if is_mark(insns, i):
            n = cost(insns, labels, region(insns, labels, i), sizes)
            each.setdefault(mark_id(insns, i), []).append(n)
    for m in sorted(each):
        print("mark=%d sites=%d instructions=%d each=%s" %
              (m, len(each[m]), max(each[m]), ",".join(map(str, each[m]))))


def combine(regions_path, hits_path, detail):
    ins = {}
    for line in open(regions_path):
        f = dict(kv.split("=") for kv in line.split())
        ins[int(f["mark"])] = int(f["instructions"])
    cases = []
    for line in open(hits_path):
        words = line.split()
        if not words or words[0] not in ("case", "hits"):
            continue
        f = dict(kv.split("=") for kv in words[1:])
        if words[0] == "case":
            cases.append((f, {}))
        elif words[0] == "hits":
            cases[-1][1][int(f["mark"])] = int(f["warp_passes"])
    ids = mark_names()
    name = {i: n for n, i in ids.items()}
    for f, hits in cases:
        total, parts = 0, []
        for m, p in hits.items():
            if p and m not in ins:
                sys.exit("sass_marks: mark %d ran but is not in the SASS" % m)
            n = p * ins.get(m, 0)
            if m == ids["MARK_ENTRY"]:
                n += p * ins[0]
            total += n
            parts.append((n, m, p))
        block = int(f["size"]) >= BLOCK_R
        # the loop the copy ran most: a full step of its path, or a group's
        # (MARK_GROUP_TSTEP2: two blocks a lane, 1024 bytes a step)
        steps = ["MARK_BSTEP_FULL"] if block else ["MARK_STEP_FULL",
                                                   "MARK_GROUP_STEP",
                                                   "MARK_GROUP_TSTEP",
                                                   "MARK_GROUP_TSTEP2"]
        steps = [ids[n] for n in steps if n in ids]
        most = max(steps, key=lambda m: hits.get(m, 0))
        loop = ins.get(most, 0)
        if most == ids.get("MARK_GROUP_TSTEP2"):
            loop /= 2.0  # per 512 bytes, as the others
        stage = ("stage=%s dtype=%s " % (f["stage"], f["dtype"])
                 if "stage" in f else "")
        print("%ssize=%s width=%s instructions_per_byte_all_in=%.3f path=%s "
              "loop_instructions_per_byte=%.3f" %
              (stage, f["size"], f["width"], total / float(f["bytes"]),
               "block" if block else "warp", loop / 512.0))
        if detail:
            for n, m, p in sorted(parts, reverse=True):
                if n:
                    print("  %-18s passes=%-6d instructions=%-4d per_byte=%.3f"
                          % (name.get(m, m), p, ins.get(m, 0),
                             n / float(f["bytes"])))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "regions":
        regions(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "combine":
        combine(sys.argv[2], sys.argv[3], "--detail" in sys.argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
