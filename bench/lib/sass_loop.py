#!/usr/bin/env python3
"""Counts the SASS instructions of the decompress kernel's decode loop.

Reads nvdisasm -hex's listing (a file, or stdin) and finds, in the named
kernel, its full-path decode loop (docs/ARCHITECTURE.md "The decode
plan"): of the natural loops of the control-flow graph, the smallest that
holds both a warp shuffle up (the scan) and a 16-byte global store.  The
divergent fallback of the warp collectives (BRA.DIV) is left out: a warp
on the decode path is converged.  Prints `instructions=N blocks=B` for
one trip: every instruction of the loop's blocks counted once, so
conditional blocks inside it (if any) count as if taken."""
import re
import sys

INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]{16}) \*/")
WORD = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
LABEL = re.compile(r"^(\S+):\s*$")


def parse_all(lines, function, labels=None):
    """The function's instructions, each as [text, low encoding word], from
    nvdisasm -hex: a line with text and the low word, then a line with the
    high word.  nvdisasm 11.8 prints an opcode it does not know (VIADD,
    ...) as its two words alone, without text or label: "UNKNOWN".  Every
    instruction is 16 bytes, so its address is its index * 16.  labels: a
    dict that gets the instruction index of each label in the function."""
    insns, inside, high_next = [], False, False
    for line in lines:
        if line.startswith(".text."):
            inside = line.strip() == ".text.%s:" % function
            continue
        if not inside:
            continue
        m = LABEL.match(line)
        if m:
            if labels is not None:
                labels[m.group(1)] = len(insns)
            continue
        m = INSN.match(line)
        if m:
            insns.append([m.group(2), int(m.group(3), 16)])
            assert int(m.group(1), 16) == 16 * (len(insns) - 1), line
            high_next = True
            continue
        m = WORD.match(line)
        if m:
            if not high_next:  # the low word of an unknown instruction
                insns.append(["UNKNOWN", int(m.group(1), 16)])
            high_next = not high_next
    return insns


def branch_target(index, low):
    """The instruction index a BRA at `index` with encoding low word `low`
    jumps to (sm_90: a signed offset in 4-byte units from the next
    instruction, bits 16-23 and 34-63)."""
    imm = ((low >> 16) & 0xFF) | ((low >> 34) << 8)
    if low >> 63:
        imm -= 1 << 38
    return index + 1 + (imm * 4) // 16


def opcode(text):
    words = text.split()
    return words[1] if words[0].startswith("@") else words[0]


def predicated(text):
    return text.split()[0].startswith("@")


def is_branch(t):
    op = opcode(t)
    return op.startswith("BRA") and not op.startswith("BRA.DIV")


def blocks(insns):
    """Basic blocks [start, end) and their successors."""
    leaders = {0}
    for i, (t, low) in enumerate(insns):
        if is_branch(t):
            leaders.add(branch_target(i, low))
        if is_branch(t) or opcode(t) == "EXIT":
            leaders.add(i + 1)
    starts = sorted(s for s in leaders if s < len(insns))
    ends = starts[1:] + [len(insns)]
    index = {s: k for k, s in enumerate(starts)}
    succ = []
    for s, e in zip(starts, ends):
        last, low = insns[e - 1]
        op, out = opcode(last), set()
        ends_flow = (op.startswith("BRA") and not op.startswith("BRA.DIV")
                     and not predicated(last)) or (op == "EXIT" and
                                                   not predicated(last))
        if not ends_flow and e < len(insns):
            out.add(index[e])
        if is_branch(last):
            out.add(index[branch_target(e - 1, low)])
        succ.append(out)
    return list(zip(starts, ends)), succ


def reachable(succ):
    seen, work = {0}, [0]
    while work:
        for v in succ[work.pop()]:
            if v not in seen:
                seen.add(v)
                work.append(v)
    return seen


def natural_loops(bbs, succ):
    """Blocks of each loop: a back edge u -> h (h not after u) and every
    block that reaches u without passing h; only blocks reachable from the
    entry without the collectives' divergent fallback."""
    live = reachable(succ)
    pred = [set() for _ in bbs]
    for u, out in enumerate(succ):
        for v in out:
            if u in live:
                pred[v].add(u)
    for u, out in enumerate(succ):
        if u not in live:
            continue
        for h in out:
            if h > u:
                continue  # forward edge
            body, work = {h, u}, [u]
            while work:
                x = work.pop()
                for p in pred[x]:
                    if p not in body:
                        body.add(p)
                        work.append(p)
            yield body


def main():
    src = open(sys.argv[2]) if len(sys.argv) > 2 else sys.stdin
    insns = parse_all(src.read().splitlines(), sys.argv[1])
    bbs, succ = blocks(insns)
    best = None
    for body in natural_loops(bbs, succ):
        ops = [opcode(insns[i][0]) for b in body for i in range(*bbs[b])]
        if any(o.startswith("SHFL.UP") for o in ops) and any(
                o.startswith("STG") and ".128" in o for o in ops):
            if best is None or len(ops) < best[0]:
                best = (len(ops), len(body))
    if best is None:
        sys.exit("no decode loop found in %s" % sys.argv[1])
    print("instructions=%d blocks=%d" % best)


if __name__ == "__main__":
    main()
