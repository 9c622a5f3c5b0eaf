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
    """Compact UTF-8 JSON, the same bytes on every attempt. A ``Decimal`` is
    written as the exact JSON number it is (``Decimal("49.00")`` → ``49.00``),
    so what ``loads`` read is sent back unchanged; NaN and infinities, and
    anything that is not JSON, raise ``ValueError`` or ``TypeError``."""
    out: List[str] = []
    _encode(value, out)
    return "".join(out).encode("utf-8")


def _encode(value: Any, out: List[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a JSON number")
        out.append(format(value, "f"))
    elif isinstance(value, float):
        out.append(json.dumps(value, allow_nan=False))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys are strings, not {type(key).__name__}")
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _encode(item, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"a {type(value).__name__} is not JSON")


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
