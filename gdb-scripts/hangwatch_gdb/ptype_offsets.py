"""Parses gdb's `ptype /o struct X` text into {dotted field path: (offset, size)}: the
independent answer that tests hold NcclHostLayout's derived offsets against."""
import re

_FIELD = re.compile(r"^/\*\s*(?P<off>\d+)(?::\s*\d+)?\s*\|\s*(?P<size>\d+)\s*\*/\s+(?P<decl>.*)$")
_CLOSE = re.compile(r"^\}\s*(?P<name>\w+)?(?:\[\d+\])*\s*;$")


def _member_name(decl):
    fm = re.search(r"\(\*\s*(\w+)\)", decl)  # function pointer: "ncclResult_t (*name)(...)"
    if fm:
        return fm.group(1)
    return re.sub(r"(\[\d+\])+$", "", decl.rstrip(";").split()[-1]).lstrip("*&")


def parse_ptype_offsets(text):
    # Each open struct collects (name, offset, size, children); a nested one learns its
    # name only at its closing "} name;" line.
    stack = [[]]
    opened = []
    for raw in text.splitlines():
        line = raw.strip()
        m = _FIELD.match(line)
        if m:
            decl = m["decl"].strip()
            off, size = int(m["off"]), int(m["size"])
            if decl.endswith("{") and not decl.startswith("type ="):
                opened.append((off, size))
                stack.append([])
            elif not decl.startswith("type ="):
                stack[-1].append((_member_name(decl), off, size, []))
            continue
        c = _CLOSE.match(line)
        if c and c["name"] and opened:
            off, size = opened.pop()
            children = stack.pop()
            stack[-1].append((c["name"], off, size, children))
    fields = {}

    def flatten(prefix, members):
        for name, off, size, children in members:
            path = prefix + name
            fields[path] = (off, size)
            flatten(path + ".", children)

    flatten("", stack[0])
    return fields
