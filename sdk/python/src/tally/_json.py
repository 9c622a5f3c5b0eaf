"""Reading JSON answers without ever making a float.

Every JSON number with a fraction or exponent is read as ``Decimal``;
amounts arrive as strings anyway and are parsed to ``Decimal`` by the
models. A value of the wrong type raises ``ValueError``, which the client
turns into ``DecodeError``.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any, Dict, List, Mapping, Optional

JsonObject = Mapping[str, Any]


def loads(content: bytes) -> Any:
    return json.loads(content.decode("utf-8"), parse_float=Decimal)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, the same bytes on every attempt."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def obj(value: Any, what: str = "value") -> JsonObject:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def string(o: JsonObject, key: str) -> str:
    value = o.get(key)
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} is not a string: {value!r}")
    return value


def opt_string(o: JsonObject, key: str) -> Optional[str]:
    value = o.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} is not a string: {value!r}")
    return value


def integer(o: JsonObject, key: str) -> int:
    value = o.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field {key!r} is not an integer: {value!r}")
    return value


def opt_integer(o: JsonObject, key: str) -> Optional[int]:
    if o.get(key) is None:
        return None
    return integer(o, key)


def boolean(o: JsonObject, key: str) -> bool:
    value = o.get(key)
    if not isinstance(value, bool):
        raise ValueError(f"field {key!r} is not a boolean: {value!r}")
    return value


def decimal(o: JsonObject, key: str) -> Decimal:
    """An exact decimal from a decimal string (or an integral JSON number)."""
    value = o.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)):
        raise ValueError(f"field {key!r} is not a decimal: {value!r}")
    try:
        result = Decimal(value)
    except InvalidOperation:
        raise ValueError(f"field {key!r} is not a decimal: {value!r}") from None
    if not result.is_finite():
        raise ValueError(f"field {key!r} is not a finite decimal: {value!r}")
    return result


def opt_decimal(o: JsonObject, key: str) -> Optional[Decimal]:
    if o.get(key) is None:
        return None
    return decimal(o, key)


def string_map(o: JsonObject, key: str) -> Optional[Dict[str, str]]:
    value = o.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"field {key!r} is not a map of strings")
    return dict(value)


def objects(o: JsonObject, key: str) -> List[JsonObject]:
    value = o.get(key)
    if not isinstance(value, list):
        raise ValueError(f"field {key!r} is not a list")
    return [obj(item, f"an item of {key!r}") for item in value]


def strings(o: JsonObject, key: str) -> List[str]:
    value = o.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"field {key!r} is not a list of strings")
    return list(value)
