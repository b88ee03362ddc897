"""The public home of icecommit's errors: ``from icecommit.errors import ...`` (they are
defined in :mod:`icecommit.core.errors`)."""

from icecommit.core.errors import *  # noqa: F403
from icecommit.core.errors import __all__ as __all__
