"""Finds the compare and the load of NCCL's counter spin loop in SASS disassembly.

NCCL's SIMPLE wait (prims_simple.h waitPeer, and PAT's patCopy/patReduce) reloads the peer's
head or tail with a volatile 64-bit load (LDG.E.64.STRONG.SYS / LD.E.64.STRONG.SYS ...) and
compares it with a 64-bit ISETP pair (.U32, then .EX) against the step it needs, until it is
reached. At a hung PC the warp sits somewhere inside that loop. What the compiler makes of it
(NCCL 2.28's sm_90 SASS, as cuobjdump prints libnccl.so.2) is not the loop's source order:
  - the loop is rotated: the compare comes first and uses the value the previous iteration
    loaded (`ISETP ...; @P BRA exit; @!P LDG R56, [R62.64]; ...; BRA top`);
  - the send side adds NCCL_STEPS to the loaded head before comparing (`IADD3 R3, P2, R56,
    0x8, RZ` / `IMAD.X R3, RZ, RZ, R57, P2`), or a register holding 0 or NCCL_STEPS in the
    generic wait, and compares that with step + StepPerSlice;
  - registers are reused: the low and high halves of a sum in one register, a target
    recomputed inside the loop, the load's address reloaded from shared memory.
So the match follows the data: a low compare and its .EX, one operand whose value comes (at
the compare, walking back around the loop) from a qualifying load, directly or through one
add of a constant or a register; the other operand the target. Whether the registers hold
those values at the PC the warp is parked at is checked the same way: each must have the
same reaching definition at the PC as where the loop uses it. Registers mid-update at the PC
are named (`not_live`), never read as if they held the counter.
"""
import re

# cuda-gdb `x/Ni $pc` or `disassemble` lines: "   0x00007fffd3a5c1a0 <+416>:\tLDG.E.64.STRONG.SYS R4, desc[UR4][R2.64] ;"
_LINE = re.compile(r"^\s*(?:=>\s*)?(?P<addr>0x[0-9a-fA-F]+)(?:\s*<[^>]*>)?:?\s+(?P<text>.*?)\s*;?\s*$")
_PRED = re.compile(r"^@!?U?P[T0-9]+\s+")
_LOAD = re.compile(r"^(?P<op>LDG|LD)(?P<mods>(?:\.[A-Z0-9_]+)*)\s+(?P<dst>R\d+)\s*,\s*(?P<addr>.+)$")
_SETP = re.compile(r"^ISETP(?P<mods>(?:\.[A-Z0-9_]+)*)\s+(?P<args>.+)$")
_BRA = re.compile(r"^(?P<op>BRA|JMP)(?:\.[A-Z0-9_]+)*\s+(?:!?U?P[T0-9]+\s*,\s*)?"
                  r"(?:`?\(?[^)]*\)?`?\s*)?(?P<target>0x[0-9a-fA-F]+)")
_ADD = re.compile(r"^IADD3\s+(?P<dst>R\d+)\s*,\s*(?:P\d\s*,\s*)?(?:P\d\s*,\s*)?(?P<a>\S+?)\s*,\s*(?P<b>\S+?)\s*,\s*RZ$")
_LOCAL = re.compile(r"^(?P<op>LDL|STL)(?P<mods>(?:\.[A-Z0-9_]+)*)\s+(?:(?P<dst>R\d+)\s*,\s*)?"
                    r"\[R1(?:\s*\+\s*(?P<off>0x[0-9a-fA-F]+|\d+))?\]"
                    r"(?:\s*,\s*(?P<src>R\d+))?$")
_SHARED_LOAD = re.compile(r"^LDS\.64\s+(?P<dst>R\d+)\s*,\s*\[(?P<base>R\d+)(?:\s*\+\s*(?P<off>0x[0-9a-fA-F]+|\d+))?\]$")
_ADDR_REG = re.compile(r"\[\s*(?:desc\[[^\]]*\]\s*)?\[?\s*(?P<reg>R\d+)(?:\.64)?\s*(?:\+\s*(?P<off>-?0x[0-9a-fA-F]+|-?\d+))?\s*\]")
_REG = re.compile(r"^R(\d+)$")
# A strong or volatile load of 64 or 128 bits: what a loop polling memory does (a counter, or
# LL's flags in the buffer).
_POLL = re.compile(r"^(LDG|LD)(?=[.A-Z0-9_]*\.(?:64|128))(?=[.A-Z0-9_]*\.(?:STRONG|VOLATILE))[.A-Z0-9_]*\s")
# Instructions that write no general register (or only uniform/predicate/barrier state).
_NO_REG_DST = re.compile(r"^(ST|RED|ATOM[SG]?\b|ISETP|FSETP|DSETP|PLOP3|BRA|JMP|BRX|EXIT|RET|CALL|YIELD|BAR|"
                         r"BSSY|BSYNC|BREAK|"
                         r"WARPSYNC|NOP|CCTL|MEMBAR|FENCE|ERRBAR|DEPBAR|R2UR|S2UR|U[A-Z]|LDGMC|VOTEU|NANOSLEEP)")


def parse_disassembly(text):
    """[(address, instruction text without predicate prefix, predicate)]"""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        t = m["text"].strip().rstrip(";").strip()
        t = re.sub(r"^\{\s*|\s*\}$", "", t)
        pred = None
        pm = _PRED.match(t)
        if pm:
            pred = pm.group(0).strip()
            t = t[pm.end():]
        out.append((int(m["addr"], 16), t, pred))
    return out


def _operands(text):
    parts = text.split(None, 1)
    return [o.strip() for o in parts[1].split(",")] if len(parts) > 1 else []


def writes(text):
    """The general registers an instruction writes: its first operand (two for a 64-bit
    result, four for 128), none for stores, compares, branches and uniform-only ones."""
    if _NO_REG_DST.match(text):
        return set()
    ops = _operands(text)
    m = _REG.match(ops[0]) if ops else None
    if not m:
        return set()
    n = int(m[1])
    mnemonic = text.split(None, 1)[0]
    width = 4 if ".128" in mnemonic else 2 if (".64" in mnemonic or mnemonic.startswith("CS2R")) else 1
    return {f"R{n + i}" for i in range(width)}


def _qualifying_load(text):
    """A volatile/strong 64-bit load of a counter: (destination low register, address
    register, offset), or None."""
    m = _LOAD.match(text)
    if not m or ".64" not in m["mods"] or not any(v in m["mods"] for v in (".STRONG", ".VOLATILE", ".SYS", ".GPU")):
        return None
    a = _ADDR_REG.search(m["addr"])
    return m["dst"], a["reg"] if a else None, int(a["off"], 0) if a and a["off"] else 0


class _Loop:
    def __init__(self, body):
        self.body = body  # [(address, text, predicate)], from the branch target to the back branch
        self.index = {addr: i for i, (addr, _t, _p) in enumerate(body)}
        self._writes = [writes(t) for _a, t, _p in body]

    def reaching(self, reg, i):
        """Index of the instruction whose write of `reg` reaches instruction i (walking back
        around the loop), or None when nothing in the loop writes it (set before the loop)."""
        n = len(self.body)
        for step in range(1, n + 1):
            j = (i - step) % n
            if reg in self._writes[j]:
                return j
        return None


def find_spin_loop(instructions, pc):
    """The counter wait loop around `pc`: a backward branch at or after pc whose target is
    at or before pc, with a 64-bit compare one of whose operands comes from a volatile
    64-bit load of the loop. Returns {"load_pc", "observed_regs", "address_reg",
    "address_offset", "compare_pc", "target_regs", "added" (0, a constant or a register the
    loaded value is increased by before the compare), "not_live" ({"observed", "target",
    "address"}: registers that do not hold those values at pc), "observed_slot" and
    "address_slot" (the local-memory offsets from R1 where the compiler keeps the counter or
    its address, which hold them whatever the pc; None when in registers only),
    "address_shared" ((base register, offset) in shared memory where the loop loads the
    counter's address from, its base valid at pc; or None), "branch_pc", "loop_start"};
    {"unmatched": load text, "branch_pc", "loop_start"} for a loop that polls memory with
    a compare that is not that (LL flags, a counter kept in local memory); or None."""
    for addr, text, _pred in instructions:
        if addr < pc:
            continue
        b = _BRA.match(text)
        if not b:
            continue
        target = int(b["target"], 16)
        if target > pc:
            continue
        loop = _Loop([ins for ins in instructions if target <= ins[0] <= addr])
        found = _match_body(loop, loop.index.get(pc))
        if found:
            found["branch_pc"] = addr
            found["loop_start"] = target
            return found
    return None


def _match_body(loop, pc_index):
    body = loop.body
    for i, (addr, text, _pred) in enumerate(body):
        s = _SETP.match(text)
        if not s or ".EX" in s["mods"] or ".U32" not in s["mods"]:
            continue
        ex = _paired_ex(body, i)
        ops = _operands(text)[2:4]  # ISETP.cmp.U32.AND P0, PT, a, b, PT
        if ex is None or len(ops) < 2:
            continue
        ex_ops = _operands(body[ex][1])[2:4]
        for obs_pos in (0, 1):
            source = _observed_source(loop, i, ops[obs_pos])
            target_lo, target_hi = ops[1 - obs_pos], ex_ops[1 - obs_pos] if len(ex_ops) == 2 else None
            if source is None or not _REG.match(target_lo) or not (target_hi and _REG.match(target_hi)):
                continue
            t = loop.reaching(target_lo, i)
            if t is not None and _qualifying_load(body[t][1]):
                continue  # two counters compared (a FIFO's head and tail): not a wait for a step
            load_i, added, slot = source
            dst, address_reg, offset = _qualifying_load(body[load_i][1])
            address_reg = _copied_from(loop, load_i, address_reg)
            observed = [dst, f"R{int(dst[1:]) + 1}"]
            found = {"load_pc": body[load_i][0], "observed_regs": observed, "address_reg": address_reg,
                     "address_offset": offset, "compare_pc": addr, "target_regs": [target_lo, target_hi],
                     "added": added, "observed_slot": slot, "address_slot": _address_slot(loop, load_i, address_reg)}
            found["not_live"] = _not_live(loop, pc_index, found, i, ex, load_i)
            found["address_shared"] = _address_in_shared(loop, load_i, address_reg, pc_index)
            return found
    polls = next((t for _a, t, _p in body if _POLL.match(t)), None)
    return {"unmatched": polls} if polls else None


def _paired_ex(body, i):
    """The .EX compare that finishes the 64-bit compare at i: the next ISETP .EX writing the
    same predicate, within a few instructions."""
    pred = _operands(body[i][1])[0]
    for j in range(i + 1, min(i + 6, len(body))):
        s = _SETP.match(body[j][1])
        if s and ".EX" in s["mods"] and _operands(body[j][1])[0] == pred:
            return j
    return None


def _loaded(loop, reg, i):
    """(index of the qualifying load, the local-memory slot it went through or None) when the
    value of `reg` at instruction i is what the loop's counter load read: directly, or
    spilled to [R1+slot] and loaded back (the compiler keeps the counter there when short of
    registers)."""
    d = loop.reaching(reg, i)
    if d is None:
        return None
    text = loop.body[d][1]
    load = _qualifying_load(text)
    if load and load[0] == reg:
        return d, None
    m = _LOCAL.match(text)
    if not m or m["op"] != "LDL" or m["dst"] != reg:
        return None
    slot = int(m["off"] or "0", 0)
    for j, (_a, t, _p) in enumerate(loop.body):
        st = _LOCAL.match(t)
        if st and st["op"] == "STL" and int(st["off"] or "0", 0) == slot and st["src"]:
            source = loop.reaching(st["src"], j)
            load = _qualifying_load(loop.body[source][1]) if source is not None else None
            if load and load[0] == st["src"]:
                return source, slot
    return None


def _observed_source(loop, i, operand):
    """(index of the qualifying load, what was added, the local slot it went through) when
    the value of `operand` at instruction i is a counter the loop loads, directly or plus one
    constant or register."""
    if not _REG.match(operand):
        return None
    direct = _loaded(loop, operand, i)
    if direct:
        return direct[0], 0, direct[1]
    d = loop.reaching(operand, i)
    m = _ADD.match(loop.body[d][1]) if d is not None else None
    if not m or m["dst"] != operand:
        return None
    for x, k in ((m["a"], m["b"]), (m["b"], m["a"])):
        loaded = _loaded(loop, x, d) if _REG.match(x) else None
        if not loaded:
            continue
        if _REG.match(k):
            return loaded[0], k, loaded[1]
        try:
            return loaded[0], int(k, 0), loaded[1]
        except ValueError:
            return None
    return None


_MOV = re.compile(r"^(?:IMAD\.MOV\.U32\s+(?P<dst>R\d+)\s*,\s*RZ\s*,\s*RZ\s*,\s*(?P<src>R\d+)|"
                  r"MOV\s+(?P<dst2>R\d+)\s*,\s*(?P<src2>R\d+))$")


def _copied_from(loop, load_i, address_reg):
    """The register pair the load's address was copied from just before it (the compiler
    copies a pointer into the pair the load then overwrites with the counter), else its own."""
    if not address_reg:
        return address_reg
    high = f"R{int(address_reg[1:]) + 1}"
    sources = []
    for reg in (address_reg, high):
        d = loop.reaching(reg, load_i)
        m = _MOV.match(loop.body[d][1]) if d is not None else None
        if not m or (m["dst"] or m["dst2"]) != reg:
            return address_reg
        sources.append(m["src"] or m["src2"])
    low_src, high_src = sources
    return low_src if high_src == f"R{int(low_src[1:]) + 1}" else address_reg


def _address_in_shared(loop, load_i, address_reg, p):
    """(base register, offset) when the load's address is loaded from shared memory at
    base + offset in the loop (PAT keeps its peers' head and tail pointers there) and the base
    register holds the same value at pc p as there; else None."""
    if not address_reg or p is None:
        return None
    d = loop.reaching(address_reg, load_i)
    m = _SHARED_LOAD.match(loop.body[d][1]) if d is not None else None
    if not m or m["dst"] != address_reg or loop.reaching(m["base"], p) != loop.reaching(m["base"], d):
        return None
    return m["base"], int(m["off"] or "0", 0)


def _address_slot(loop, load_i, address_reg):
    """The local slot [R1+slot] the load's address register was loaded from, or None."""
    if not address_reg:
        return None
    d = loop.reaching(address_reg, load_i)
    m = _LOCAL.match(loop.body[d][1]) if d is not None else None
    return int(m["off"] or "0", 0) if m and m["op"] == "LDL" and m["dst"] == address_reg else None


def _not_live(loop, p, found, compare_i, ex_i, load_i):
    """{"observed", "target", "address"}: the registers that at instruction p (the parked
    PC) do not hold what the loop compares. The loaded pair's reaching definition at p must
    be the load; the target pair's and an added register's the same at p as at the compare;
    the address's the same as at the load. A PC outside the listing: all of them."""
    everything = {"observed": list(found["observed_regs"]), "target": list(found["target_regs"]),
                  "address": [found["address_reg"]] if found["address_reg"] else []}
    if p is None:
        return everything
    bad = {"observed": [r for r in found["observed_regs"] if loop.reaching(r, p) != load_i], "target": [],
           "address": []}
    targets = [(found["target_regs"][0], compare_i), (found["target_regs"][1], ex_i)]
    if isinstance(found["added"], str):
        targets.append((found["added"], compare_i))
    bad["target"] = [r for r, at in targets if loop.reaching(r, p) != loop.reaching(r, at)]
    low = found["address_reg"]
    if low:
        bad["address"] = [r for r in (low, f"R{int(low[1:]) + 1}") if loop.reaching(r, p) != loop.reaching(r, load_i)]
    return bad


def combine_u64(low, high):
    return (int(low) & 0xFFFFFFFF) | ((int(high) & 0xFFFFFFFF) << 32)
