"""The SHA-256 of every jar the Java Iceberg environment takes from Maven Central, checked
against the list kept beside setup.sh (``jars.sha256``: one ``<sha256>  <folder>/<jar>`` a
line, the folder being ``jars``, ``jdbc`` or ``iceberg-rest``).

    checksums.py check LIST FOLDER...    exit 1 naming every jar that differs or is not listed
    checksums.py update LIST FOLDER...   write the jars of the folders into LIST (others kept)

Maven's own check (``--strict-checksums``) compares a download with the SHA-1 the repository
serves beside it; this list pins what the project reviewed, so a changed artifact fails even
where the repository serves a matching SHA-1.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read(listing: Path) -> dict[str, str]:
    """``<folder>/<jar>`` to its SHA-256, from the list (empty where there is none)."""
    if not listing.is_file():
        return {}
    pinned = {}
    for line in listing.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            pinned[name.strip()] = digest
    return pinned


def found(folders: list[Path]) -> dict[str, Path]:
    return {f"{folder.name}/{jar.name}": jar for folder in folders if folder.is_dir() for jar in folder.glob("*.jar")}


def check(listing: Path, folders: list[Path]) -> list[str]:
    """What is wrong, one line a jar (empty: every jar is listed with its SHA-256)."""
    pinned = read(listing)
    wrong = []
    for name, jar in sorted(found(folders).items()):
        actual = sha256(jar)
        if name not in pinned:
            wrong.append(f"{name}: not in {listing.name} (sha256 {actual})")
        elif pinned[name] != actual:
            wrong.append(f"{name}: sha256 {actual}, {listing.name} pins {pinned[name]}")
    return wrong


def update(listing: Path, folders: list[Path]) -> None:
    pinned = read(listing)
    pinned.update({name: sha256(jar) for name, jar in found(folders).items()})
    header = "# SHA-256 of the jars scripts/java_iceberg/setup.sh takes from Maven Central (checksums.py update)\n"
    listing.write_text(header + "".join(f"{digest}  {name}\n" for name, digest in sorted(pinned.items())))


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ("check", "update"):
        print(__doc__, file=sys.stderr)
        return 2
    listing, folders = Path(argv[1]), [Path(a) for a in argv[2:]]
    if argv[0] == "update":
        update(listing, folders)
        return 0
    wrong = check(listing, folders)
    if not found(folders):
        wrong.append(f"no jar in {', '.join(map(str, folders))}")
    for line in wrong:
        print(f"java-iceberg setup: checksum refused: {line}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
