"""Inside the committer, only the shared conflict validators and the snapshot producer read
manifests: a mode's conflict rule is a declaration, not a manifest walk of its own."""

from __future__ import annotations

import ast
from pathlib import Path

COMMITTER = Path(__file__).resolve().parents[2] / "icecommit" / "committer"
READERS = {"validators.py", "producer.py"}
#: The calls that read a manifest list or a manifest (pyiceberg's).
READING = {"manifests", "fetch_manifest_entry"}


def _reads(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in READING
    ]


def test_only_the_validators_and_the_producer_read_manifests() -> None:
    found = {
        str(path.relative_to(COMMITTER)): lines
        for path in sorted(COMMITTER.rglob("*.py"))
        if path.name not in READERS and (lines := _reads(path))
    }
    assert found == {}


def test_the_check_sees_a_manifest_walk(tmp_path: Path) -> None:
    walk = tmp_path / "walk.py"
    walk.write_text("def f(s, io):\n    return [e for m in s.manifests(io) for e in m.fetch_manifest_entry(io)]\n")
    assert _reads(walk) == [2, 2]
