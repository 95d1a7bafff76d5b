"""Just enough PNG decoding (stdlib zlib) to check a headless-browser screenshot:
8-bit RGB or RGBA, non-interlaced, as Chromium writes them."""
import struct
import zlib


def decode(data):
    """Returns (width, height, rows) with rows a list of bytes objects, 3 or 4 bytes per pixel."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if width is None:
        raise ValueError("PNG without IHDR")
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def colour_counts(path, colours):
    """How many pixels match each (r, g, b) in `colours` exactly, and how many distinct colours there are."""
    with open(path, "rb") as f:
        width, height, rows, bpp = decode(f.read())
    counts = {c: 0 for c in colours}
    distinct = set()
    for row in rows:
        for x in range(0, width * bpp, bpp):
            px = (row[x], row[x + 1], row[x + 2])
            if len(distinct) < 4096:
                distinct.add(px)
            if px in counts:
                counts[px] += 1
    return counts, len(distinct), (width, height)
