"""Fixtures: real tally servers on each engine, API keys, and clients.

The suite runs on SQLite always and on PostgreSQL when
``TALLY_TEST_POSTGRES_URL`` names a server it may create databases on
(``TALLY_REQUIRE_POSTGRES=1`` turns its absence into a failure). Tests
that take ``make_client``/``client`` run once with ``tally.Client`` and
once with ``tally.AsyncClient`` (driven to completion by ``Blocking``), so
one scenario checks both.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import pytest

import tally

from .tallyserver import Databases, TallyServer, tally_binary

ENGINES = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def tally_bin() -> Path:
    try:
        return tally_binary()
    except RuntimeError as e:
        pytest.exit(str(e), returncode=2)


@pytest.fixture(scope="session", params=ENGINES)
def databases(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Databases]:
    engine = request.param
    url = None
    if engine == "postgres":
        url = os.environ.get("TALLY_TEST_POSTGRES_URL")
        if not url:
            if os.environ.get("TALLY_REQUIRE_POSTGRES") == "1":
                pytest.fail("TALLY_REQUIRE_POSTGRES=1 but TALLY_TEST_POSTGRES_URL is not set")
            pytest.skip("PostgreSQL tests SKIPPED: TALLY_TEST_POSTGRES_URL is not set")
    dbs = Databases(engine, tmp_path_factory.mktemp(engine), url)
    yield dbs
    dbs.drop_all()


@pytest.fixture(scope="session")
def engine(databases: Databases) -> str:
    return databases.engine


@pytest.fixture(scope="session")
def server(tally_bin: Path, databases: Databases) -> Iterator[TallyServer]:
    """One server per engine for the whole run; tests keep apart by tenant."""
    srv = TallyServer(tally_bin, databases.new(), databases.workdir).start()
    yield srv
    srv.stop()


@pytest.fixture
def start_server(tally_bin: Path, databases: Databases) -> Iterator[Callable[..., TallyServer]]:
    """Starts another server, on a database of its own, with extra flags."""
    started: List[TallyServer] = []

    def start(*extra_args: str) -> TallyServer:
        srv = TallyServer(tally_bin, databases.new(), databases.workdir, extra_args).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def new_tenant() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def api_key(server: TallyServer) -> str:
    """A key of a tenant of its own, with every scope."""
    return server.create_key(new_tenant())


class Blocking:
    """Drives an ``AsyncClient`` to completion, so that a test written
    against the synchronous interface checks the asyncio client too."""

    def __init__(self, client: tally.AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self.loop.run_until_complete(attr(*a, **k))
        if inspect.isasyncgenfunction(attr):

            async def collect(*a: Any, **k: Any) -> List[Any]:
                return [item async for item in attr(*a, **k)]

            return lambda *a, **k: iter(self.loop.run_until_complete(collect(*a, **k)))
        return attr

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())


@pytest.fixture(params=["sync", "async"])
def client_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_client(client_kind: str) -> Iterator[Callable[..., Any]]:
    """``make_client(base_url, api_key, policy=…, on_retry=…)``: a
    ``Client`` or a driven ``AsyncClient``."""
    made: List[Any] = []
    loop = asyncio.new_event_loop() if client_kind == "async" else None

    def make(
        base_url: str,
        api_key: Optional[str] = None,
        policy: Optional[tally.RetryPolicy] = None,
        on_retry: Optional[tally.OnRetry] = None,
    ) -> Any:
        c: Any
        if loop is None:
            c = tally.Client(base_url, api_key, policy=policy, on_retry=on_retry)
        else:
            c = Blocking(
                tally.AsyncClient(base_url, api_key, policy=policy, on_retry=on_retry), loop
            )
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
    if loop is not None:
        loop.close()


@pytest.fixture
def client(make_client: Callable[..., Any], server: TallyServer, api_key: str) -> Any:
    """A client of the engine's server for the test's own tenant."""
    return make_client(server.base_url, api_key)


def uid(prefix: str) -> str:
    """A fresh upstream ID or account name."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"
