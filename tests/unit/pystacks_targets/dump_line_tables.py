"""Prints every code object of a few stdlib modules with its co_linetable and
the interpreter's own (start, end, line) ranges, for pystacks_line_table_test."""
import queue
import sys
import threading
import types


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


for module in (threading, queue):
    for value in vars(module).values():
        funcs = [value] if isinstance(value, types.FunctionType) else []
        if isinstance(value, type):
            funcs = [v for v in vars(value).values() if isinstance(v, types.FunctionType)]
        for func in funcs:
            for code in code_objects(func.__code__):
                print("code", code.co_firstlineno, code.co_linetable.hex() or "-")
                for start, end, line in code.co_lines():
                    print("range", start, end, -1 if line is None else line)
