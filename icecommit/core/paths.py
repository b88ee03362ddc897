"""One normalisation of file paths and URIs (facts, no I/O).

Every component that compares or deletes paths (the orphan sweep, expiry's file cleanup,
reconciliation's storage checks) compares :class:`StorageKey` values, never raw strings:

- ``file:/x``, ``file:///x``, ``file://localhost/x`` and a plain ``/x`` are one file (Java
  Iceberg writes the first, pyiceberg the second or the last);
- ``s3://``, ``s3a://`` and ``s3n://`` are one scheme;
- percent-escapes are never decoded: ``%2e%2e`` is a directory named ``%2e%2e``, as
  pyiceberg writes it, never ``..``;
- a local path is normalised lexically (repeated slashes, ``.`` and ``..`` segments), an
  object-store key is taken as it is (``a//b`` and ``a/b`` are different objects there).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

#: Schemes that name one object store under several spellings.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs", "wasbs": "wasb"}


class UnsupportedPathError(ValueError):
    """A path that cannot be compared safely (relative, or an unparsable URI)."""


@dataclass(frozen=True, order=True)
class StorageKey:
    """Where a file lives: scheme, authority (bucket, host; empty for local files) and the
    absolute path within it."""

    scheme: str
    authority: str
    path: str

    def is_under(self, root: StorageKey) -> bool:
        """True when this file lies strictly inside the folder ``root``."""
        if (self.scheme, self.authority) != (root.scheme, root.authority):
            return False
        prefix = root.path.rstrip("/") + "/"
        return self.path.startswith(prefix) and self.path != root.path

    def same_store(self, other: StorageKey) -> bool:
        """True when both live in the same file system (scheme and authority)."""
        return (self.scheme, self.authority) == (other.scheme, other.authority)

    def uri(self) -> str:
        """A URI for this key (``file:///x`` for local files)."""
        return f"{self.scheme}://{self.authority}{self.path}"


def storage_key(location: str) -> StorageKey:
    """The :class:`StorageKey` of a path or URI.

    Raises:
        UnsupportedPathError: a relative path, or a URI without a path.
    """
    if location.startswith("/"):
        return StorageKey("file", "", _local(location))
    scheme, sep, rest = location.partition(":")
    if not sep or not scheme or "/" in scheme:
        raise UnsupportedPathError(f"not an absolute path or URI: {location!r}")
    scheme = scheme.lower()
    if scheme == "file":
        if rest.startswith("//"):
            authority, slash, path = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                raise UnsupportedPathError(f"a file URI with a host is not a local path: {location!r}")
            return StorageKey("file", "", _local("/" + path if slash else "/"))
        if not rest.startswith("/"):
            raise UnsupportedPathError(f"a relative file URI: {location!r}")
        return StorageKey("file", "", _local(rest))
    if not rest.startswith("//"):
        raise UnsupportedPathError(f"a URI without an authority: {location!r}")
    authority, _, path = rest[2:].partition("/")
    return StorageKey(_SCHEME_ALIASES.get(scheme, scheme), authority, "/" + path)


def _local(path: str) -> str:
    normal = posixpath.normpath(path)
    # POSIX keeps a leading "//" as it is; it names the same root here
    return "/" + normal.lstrip("/")
