"""The client covers the API the server describes: every operation of
``GET /openapi.json`` has its method (both ways), the sync and async
clients have the same methods with the same parameters, every problem code
the document lists has its exception, and README.md's table is the table."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, Dict, Set, Tuple

import pytest

import tally
from tally.errors import BY_CODE

README = Path(__file__).resolve().parents[1] / "README.md"
HTTP_METHODS = {"get", "put", "post", "delete", "patch"}


@pytest.fixture
def openapi(client: Any) -> Dict[str, Any]:
    doc: Dict[str, Any] = client.get_openapi()
    return doc


def documented_operations(doc: Dict[str, Any]) -> Dict[Tuple[str, str], str]:
    out: Dict[Tuple[str, str], str] = {}
    for path, item in doc["paths"].items():
        # Swagger UI and the console are for browsers; Stripe calls its
        # ingest path itself (signed, no API key).
        if path.startswith(("/docs", "/console", "/v1/ingest/")):
            continue
        for method, op in item.items():
            if method in HTTP_METHODS:
                out[(method.upper(), path)] = op.get("operationId", "")
    return out


def test_every_documented_operation_has_a_method_and_no_other(openapi: Dict[str, Any]) -> None:
    documented = documented_operations(openapi)
    assert set(documented) == set(tally.OPERATIONS)
    assert len([p for _, p in documented if p.startswith("/v1/")]) >= 19


def snake(operation_id: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


def test_method_names_follow_the_operation_ids(openapi: Dict[str, Any]) -> None:
    for key, operation_id in documented_operations(openapi).items():
        assert tally.OPERATIONS[key] in (
            snake(operation_id),
            snake(operation_id).replace("open_api", "openapi"),
        )


def test_every_documented_problem_code_has_its_exception(openapi: Dict[str, Any]) -> None:
    codes: Set[str] = set(openapi["components"]["schemas"]["ProblemCode"]["enum"])
    assert codes <= set(BY_CODE), codes - set(BY_CODE)


def public_methods(cls: type) -> Dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in ("close", "aclose")
    }


def test_sync_and_async_clients_have_the_same_methods() -> None:
    sync, asynchronous = public_methods(tally.Client), public_methods(tally.AsyncClient)
    assert set(sync) == set(asynchronous)
    for name in sync:
        assert list(sync[name].parameters) == list(asynchronous[name].parameters), name
        assert [p.default for p in sync[name].parameters.values()] == [
            p.default for p in asynchronous[name].parameters.values()
        ], name
    for method in tally.OPERATIONS.values():
        assert method in sync
        assert inspect.iscoroutinefunction(getattr(tally.AsyncClient, method))


def test_the_readme_table_lists_every_operation() -> None:
    text = README.read_text()
    rows = set(
        re.findall(
            r"^\| `(GET|POST|PUT|PATCH|DELETE) ([^`]+)` \| `(\w+)\(.*\| `await (\w+)\(",
            text,
            flags=re.M,
        )
    )
    assert rows == {(m, p, name, name) for (m, p), name in tally.OPERATIONS.items()}
