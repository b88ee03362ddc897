"""Environment settings shared by every layer: the names of the environment variables and
catalog properties (no imports of other icecommit modules). Where the embedded default
lives on this machine is :mod:`icecommit.state.home`."""

from __future__ import annotations

ENV_URI = "ICECOMMIT_CATALOG_URI"
#: The name of the pyiceberg-configured catalog to open when none is given (``ic.connect()``,
#: ``ic.write(catalog=None)``, a streaming sink made without a catalog, the CLI without ``--catalog``).
ENV_CATALOG = "ICECOMMIT_CATALOG"
ENV_WAREHOUSE = "ICECOMMIT_WAREHOUSE"
ENV_HOME = "ICECOMMIT_HOME"
#: The state database (icecommit's checkpoint, metric and partition tables).
ENV_STATE_URI = "ICECOMMIT_STATE_URI"
#: The state database's earlier name, still read when ``ICECOMMIT_STATE_URI`` is unset.
ENV_METRICS_URI = "ICECOMMIT_METRICS_URI"
#: The catalog property that names the state database (``~/.pyiceberg.yaml``,
#: ``PYICEBERG_CATALOG__<NAME>__ICECOMMIT__STATE_URI``, or ``connect(..., **properties)``).
STATE_URI_PROPERTY = "icecommit.state-uri"
