"""Build a jar of Jackson classes relocated to org.apache.iceberg.shaded.com.fasterxml.jackson
(or, with ``--package``, of another package's classes relocated under org.apache.iceberg.shaded).

A pure-Python constant-pool rewrite, like maven-shade's relocation: Iceberg's Spark runtime jar
from the snowpark-connect-deps-iceberg wheel expects Jackson there but does not ship it, nor
Apache HttpClient 5 (``org.apache.hc``), which its REST catalog client uses.

Vendored from the team's shared tools (shared/tools/java-iceberg/relocate_jackson.py), reformatted;
``--package`` added.

    usage: relocate_jackson.py [--package com.fasterxml.jackson] OUT.jar IN.jar [IN.jar ...]
"""

from __future__ import annotations

import struct
import sys
import zipfile

SHADED = "org.apache.iceberg.shaded."
SLASHED = (b"com/fasterxml/jackson/", b"org/apache/iceberg/shaded/com/fasterxml/jackson/")
DOTTED = (b"com.fasterxml.jackson.", b"org.apache.iceberg.shaded.com.fasterxml.jackson.")


def relocating(package: str) -> None:
    """Relocate ``package`` (dotted) under org.apache.iceberg.shaded instead of Jackson."""
    global SLASHED, DOTTED
    dotted = package.rstrip(".") + "."
    DOTTED = (dotted.encode(), (SHADED + dotted).encode())
    SLASHED = (dotted.replace(".", "/").encode(), (SHADED + dotted).replace(".", "/").encode())


# size in bytes of each constant-pool entry after its tag, for every tag but 1 (UTF-8)
ENTRY_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 16: 2, 19: 2, 20: 2, 9: 4, 10: 4, 11: 4, 12: 4, 17: 4, 18: 4, 15: 3}


def relocate(b: bytes) -> bytes:
    return b.replace(*SLASHED).replace(*DOTTED)


def rewrite_class(data: bytes) -> bytes:
    """Relocate every UTF-8 constant of one class file; the rest is copied unchanged."""
    assert data[:4] == b"\xca\xfe\xba\xbe", "not a class file"
    out = bytearray(data[:10])
    count = struct.unpack(">H", data[8:10])[0]
    i, k = 10, 1
    while k < count:
        tag = data[i]
        if tag == 1:
            length = struct.unpack(">H", data[i + 1 : i + 3])[0]
            s = relocate(data[i + 3 : i + 3 + length])
            out += bytes([1]) + struct.pack(">H", len(s)) + s
            i += 3 + length
        else:
            size = ENTRY_SIZES[tag]
            out += data[i : i + 1 + size]
            i += 1 + size
            if tag in (5, 6):  # long and double take two slots
                k += 1
        k += 1
    out += data[i:]
    return bytes(out)


def main(out_path: str, sources: list[str]) -> int:
    seen: set[str] = set()
    classes = 0
    with zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as dst:
        for src in sources:
            with zipfile.ZipFile(src) as z:
                for entry in z.infolist():
                    name = entry.filename
                    if (
                        entry.is_dir()
                        or name.startswith("META-INF/versions/")
                        or name.endswith("module-info.class")
                        or name.upper().endswith((".SF", ".RSA", ".DSA"))
                        or name == "META-INF/MANIFEST.MF"
                    ):
                        continue
                    data = z.read(name)
                    if name.endswith(".class"):
                        data = rewrite_class(data)
                        classes += 1
                    elif name.startswith("META-INF/services/"):
                        data = relocate(data)
                    new_name = relocate(name.encode()).decode()
                    if new_name in seen:
                        continue
                    seen.add(new_name)
                    dst.writestr(new_name, data)
        dst.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    print("classes relocated:", classes)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--package"]:
        relocating(args[1])
        args = args[2:]
    sys.exit(main(args[0], args[1:]))
