"""Facts and pure rules, no I/O of their own: errors, paths, identifiers, table properties,
event time, time parsing, the ancestry and lineage views of table metadata, the checkpoint
decision and partition completeness. Imports nothing else of icecommit."""
