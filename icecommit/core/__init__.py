"""Facts and pure rules, no I/O of their own: errors, paths, identifiers, table properties,
event time, time parsing, the ancestry and lineage views of table metadata, the checkpoint
decision and partition completeness. Imports nothing else of icecommit, and opens no file,
connection or thread (``tests/test_pure_core.py``): reading a table's files is
:mod:`icecommit.catalog`'s."""
