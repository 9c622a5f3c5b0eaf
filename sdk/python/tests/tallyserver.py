"""Real ``tally serve`` processes for the tests: the binary, fresh
databases (SQLite files, PostgreSQL databases), API keys, free ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence
from urllib.parse import urlsplit, urlunsplit

import httpx

REPO = Path(__file__).resolve().parents[3]
FALLBACK_BIN = REPO / "target" / "debug" / "tally"


def tally_binary() -> Path:
    """``$TALLY_BIN``, else the checkout's debug build; a clear error if neither exists."""
    configured = os.environ.get("TALLY_BIN")
    path = Path(configured) if configured else FALLBACK_BIN
    if not path.is_file() or not os.access(path, os.X_OK):
        where = f"TALLY_BIN={configured}" if configured else f"the fallback {FALLBACK_BIN}"
        raise RuntimeError(
            f"no tally server binary at {where}. Build it with "
            f"`cargo build -p tally-api --bin tally` in {REPO} (the binary is then "
            "target/debug/tally), or point TALLY_BIN at one."
        )
    return path


def free_port() -> int:
    """A port nothing listens on: bind port 0, read the port, close."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Databases:
    """Fresh databases of one engine, all removed by ``drop_all``."""

    engine: str
    workdir: Path
    postgres_url: Optional[str] = None
    created: List[str] = field(default_factory=list)

    def new(self) -> str:
        name = f"tally_sdk_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        if self.engine == "sqlite":
            return f"sqlite://{self.workdir / (name + '.db')}"
        assert self.postgres_url is not None
        self._psql(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        parts = urlsplit(self.postgres_url)
        return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))

    def drop_all(self) -> None:
        for name in self.created:
            self._psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.created.clear()

    def _psql(self, sql: str) -> None:
        assert self.postgres_url is not None
        if shutil.which("psql") is None:
            raise RuntimeError("psql is needed to create PostgreSQL test databases")
        subprocess.run(
            ["psql", self.postgres_url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
            check=True,
            capture_output=True,
            timeout=60,
        )


class TallyServer:
    """One ``tally serve`` process on a database, listening on a free port."""

    def __init__(
        self, binary: Path, database_url: str, workdir: Path, extra_args: Sequence[str] = ()
    ) -> None:
        self.binary = binary
        self.database_url = database_url
        self.workdir = workdir
        self.extra_args = list(extra_args)
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.port = 0
        self.log_path = workdir / f"tally-{uuid.uuid4().hex[:8]}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> Dict[str, str]:
        # The server reads its settings from TALLY_* variables too: keep the
        # caller's (TALLY_BIN, TALLY_TEST_POSTGRES_URL, a TALLY_LISTEN, ...)
        # away from it, so that only the flags given here apply.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
        env["TALLY_LOG"] = os.environ.get("TALLY_LOG", "warn")
        return env

    def start(self, timeout: float = 30.0) -> TallyServer:
        for _ in range(3):  # a port taken between free_port() and the bind: try another
            self.port = free_port()
            args = [
                str(self.binary),
                "serve",
                "--database-url",
                self.database_url,
                "--listen",
                f"127.0.0.1:{self.port}",
                *self.extra_args,
            ]
            log = open(self.log_path, "ab")
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=self._env(), cwd=self.workdir
            )
            log.close()
            if self._wait_healthy(timeout):
                return self
            self.stop()
        raise RuntimeError(f"tally serve did not become healthy; its log:\n{self.log()}")

    def _wait_healthy(self, timeout: float) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if httpx.get(self.base_url + "/healthz", timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return False

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def create_key(self, tenant: str, scopes: str = "post,read,audit,admin") -> str:
        done = subprocess.run(
            [
                str(self.binary),
                "keys",
                "create",
                "--database-url",
                self.database_url,
                "--tenant",
                tenant,
                "--scopes",
                scopes,
            ],
            capture_output=True,
            env=self._env(),
            cwd=self.workdir,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tally keys create failed: {done.stderr.decode(errors='replace')}")
        return done.stdout.decode().strip()
