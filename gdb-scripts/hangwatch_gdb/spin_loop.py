"""Finds the compare and the load of NCCL's counter spin loop in SASS disassembly.

NCCL's SIMPLE wait (primitives: waitPeer) reloads the peer's head or tail with a
volatile 64-bit load (LD.E.64.STRONG.SYS / LDG.E.64.STRONG.GPU / ...) and compares it
against step + StepPerSlice (ISETP.* with .U32/.EX pairs for 64 bits) until it is
reached, branching back to the load. At a hung PC the warp sits inside that loop, so:
the load's destination registers hold the observed counter, its address register the
counter's location, and the compare's other operand the target step.
"""
import re

# cuda-gdb `x/Ni $pc` or `disassemble` lines: "   0x00007fffd3a5c1a0 <+416>:\tLDG.E.64.STRONG.SYS R4, desc[UR4][R2.64] ;"
_LINE = re.compile(r"^\s*(?:=>\s*)?(?P<addr>0x[0-9a-fA-F]+)(?:\s*<[^>]*>)?:?\s+(?P<text>.*?)\s*;?\s*$")
_PRED = re.compile(r"^@!?U?P[T0-9]+\s+")
_LOAD = re.compile(r"^(?P<op>LDG|LD|ULDC|LDS)(?P<mods>(?:\.[A-Z0-9_]+)*)\s+(?P<dst>R\d+)\s*,\s*(?P<addr>.+)$")
_SETP = re.compile(r"^(?P<op>I?SETP|ISETP)(?P<mods>(?:\.[A-Z0-9_]+)*)\s+(?P<args>.+)$")
_BRA = re.compile(r"^(?P<op>BRA|JMP)(?:\.[A-Z0-9_]+)*\s+(?:`?\(?[^)]*\)?`?\s*)?(?P<target>0x[0-9a-fA-F]+)")
_ADDR_REG = re.compile(r"\[\s*(?:desc\[[^\]]*\]\s*)?\[?\s*(?P<reg>R\d+)(?:\.64)?\s*(?:\+\s*(?P<off>-?0x[0-9a-fA-F]+|-?\d+))?\s*\]")


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


def _regs(args):
    return re.findall(r"\b(?:U?R\d+|RZ)\b", args)


def find_spin_loop(instructions, pc):
    """The loop around `pc`: a backward branch at or after pc whose target is at or before
    pc, containing a 64-bit volatile load and a compare using the loaded register.
    Returns {"load_pc", "observed_regs", "address_reg", "address_offset", "compare_pc",
    "target_regs", "branch_pc"} or None."""
    for i, (addr, text, _pred) in enumerate(instructions):
        if addr < pc:
            continue
        b = _BRA.match(text)
        if not b:
            continue
        target = int(b["target"], 16)
        if target > pc:
            continue
        body = [ins for ins in instructions if target <= ins[0] <= addr]
        found = _match_body(body)
        if found:
            found["branch_pc"] = addr
            found["loop_start"] = target
            return found
    return None


def _match_body(body):
    load = None
    for addr, text, _pred in body:
        m = _LOAD.match(text)
        if m and ".64" in m["mods"] and any(v in m["mods"] for v in (".STRONG", ".VOLATILE", ".SYS", ".GPU")):
            reg = int(m["dst"][1:])
            a = _ADDR_REG.search(m["addr"])
            load = {"load_pc": addr, "observed_regs": [f"R{reg}", f"R{reg + 1}"],
                    "address_reg": a["reg"] if a else None,
                    "address_offset": int(a["off"], 0) if a and a["off"] else 0}
            continue
        s = _SETP.match(text)
        if s and load:
            regs = _regs(s["args"])
            observed = set(load["observed_regs"])
            if observed & set(regs):
                others = [r for r in regs if r not in observed and r != "RZ" and not r.startswith("U")]
                low_high = _target_pair(body, s, others, observed)
                load.update({"compare_pc": addr, "target_regs": low_high})
                return load
    return None


def _target_pair(body, setp, others, observed):
    """Target operand registers; a 64-bit compare is an ISETP pair (low .U32, high .EX)."""
    pair = list(dict.fromkeys(others))
    for _addr, text, _pred in body:
        s = _SETP.match(text)
        if s and s is not setp and ".EX" in s["mods"]:
            for r in _regs(s["args"]):
                if r not in pair and r not in observed and r.startswith("R") and r != "RZ":
                    pair.append(r)
    return pair[:2]


def combine_u64(low, high):
    return (int(low) & 0xFFFFFFFF) | ((int(high) & 0xFFFFFFFF) << 32)
