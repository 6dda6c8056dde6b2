"""Reads a PNG (8-bit RGB/RGBA, non-interlaced, as Chromium writes screenshots) with the standard library
only, and tells how much is on it: size, distinct colours, share of the most common colour.

    png_stats("canvas.png") -> {"width", "height", "colors", "dominant_share"}
"""

import struct
import zlib
from collections import Counter


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path: str) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows of unfiltered pixel bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (2, 6) or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are read here")
    bpp = 3 if color_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((x + p) & 0xFF for x, p in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                up_left = prev[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + _paeth(left, prev[i], up_left)) & 0xFF
        elif kind != 0:
            raise ValueError(f"{path}: unknown PNG filter {kind}")
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def png_stats(path: str) -> dict:
    width, height, bpp, rows = read_png(path)
    colors = Counter()
    for row in rows:
        colors.update(row[i:i + 3] for i in range(0, len(row), bpp))
    return {"width": width, "height": height, "colors": len(colors),
            "dominant_share": colors.most_common(1)[0][1] / (width * height)}
