"""One rule for an option that a write argument gives, else a table property, else a default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from icecommit.core.errors import InvalidArgumentError


def chosen(
    argument: str,
    value: str | None,
    choices: Sequence[str],
    *,
    prop: str,
    properties: Mapping[str, str] | None,
    default: str,
) -> str:
    """``value``, else the table property ``prop``, else ``default``.

    Raises:
        InvalidArgumentError: the argument, or the property, is none of ``choices``.
    """
    accepted = f"one of {', '.join(choices)}"
    if value is None:
        value = (properties or {}).get(prop)
        if value is None:
            return default
        if value not in choices:
            raise InvalidArgumentError(f"table property {prop}", value, accepted)
        return value
    if value not in choices:
        raise InvalidArgumentError(argument, value, accepted)
    return value


__all__ = ["chosen"]
