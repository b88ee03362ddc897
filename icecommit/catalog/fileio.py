"""The FileIO icecommit configures for the catalogs it opens: pyarrow's, minus the
existence probe before each new file.

Every file an Iceberg commit writes has a new, unique name (a data file's carries its job,
checkpoint, task, attempt and a random part; manifests, manifest lists and ``metadata.json``
files carry UUIDs), so pyiceberg's check that a new file does not exist yet proves nothing.
It costs a request per file, and on object storage more: pyarrow's S3 file system answers
"not found" for a key by listing its prefix as a directory (``ListObjectsV2``). Without the
probe, the write and commit path issue no LIST at all; the orphan sweep is the only code
that lists.

It also tells a failed ``metadata.json`` upload apart (:class:`MetadataWriteError`): the
commit protocol reports it as not landed instead of as an unknown outcome.

Set a catalog's ``py-io-impl`` to ``icecommit.catalog.fileio.UniqueNamesFileIO`` to use it
with a catalog made outside :func:`icecommit.connect` (which sets it where nothing else is
configured).
"""

from __future__ import annotations

from pyiceberg.io import OutputStream
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO

#: The catalog property that names it (pyiceberg's ``py-io-impl``) and its value.
IO_IMPL_PROPERTY = "py-io-impl"
IO_IMPL = "icecommit.catalog.fileio.UniqueNamesFileIO"


class MetadataWriteError(OSError):
    """Writing a new ``metadata.json`` failed: a catalog that writes it itself (SQL, Glue,
    Hive) does so before its compare-and-swap, so the commit cannot have landed."""


class _MetadataStream:
    """A ``metadata.json`` output stream whose storage errors say what they are."""

    def __init__(self, inner: OutputStream, location: str) -> None:
        self._inner = inner
        self._location = location

    def _failed(self, e: OSError) -> MetadataWriteError:
        return MetadataWriteError(f"{self._location}: {e}")

    def write(self, b: bytes) -> int:
        try:
            return self._inner.write(b)
        except OSError as e:
            raise self._failed(e) from e

    def close(self) -> None:
        try:
            self._inner.close()
        except OSError as e:
            raise self._failed(e) from e

    def __enter__(self) -> _MetadataStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _UniqueFile(PyArrowFile):
    def create(self, overwrite: bool = False) -> OutputStream:
        """An output stream at this (unique) location, without probing for it first."""
        try:
            stream = super().create(overwrite=True)
        except OSError as e:
            if self.location.endswith(".metadata.json"):
                raise MetadataWriteError(f"{self.location}: {e}") from e
            raise
        if self.location.endswith(".metadata.json"):
            return _MetadataStream(stream, self.location)  # type: ignore[return-value]
        return stream


class UniqueNamesFileIO(PyArrowFileIO):
    """:class:`PyArrowFileIO` whose new files skip the existence probe (see the module)."""

    def new_output(self, location: str) -> PyArrowFile:
        probed = super().new_output(location)
        unique = _UniqueFile.__new__(_UniqueFile)
        unique.__dict__.update(probed.__dict__)
        return unique
