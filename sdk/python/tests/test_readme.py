"""README.md's quickstart is ten lines that run: executed against a real
server (its URL put in), on a tenant of its own. Its intents example runs
too, against a stub payment provider that honours ``Idempotency-Key``."""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import tally

from .tallyserver import TallyServer

README = Path(__file__).resolve().parents[1] / "README.md"


def first_python_block(heading: str) -> str:
    text = README.read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match is not None, f"README.md has no python block under {heading}"
    return match.group(1)


def quickstart() -> str:
    return first_python_block("## Quickstart")


def test_the_quickstart_is_ten_lines() -> None:
    assert len(quickstart().splitlines()) == 10


def test_the_quickstart_runs(server: TallyServer, api_key: str) -> None:
    code = quickstart().replace("http://127.0.0.1:8080", server.base_url)
    for run in range(2):  # the second run replays the first
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md quickstart", "exec"), {"api_key": api_key})
        lines = out.getvalue().splitlines()
        assert len(lines) == 3, lines
        assert re.fullmatch(r"ent_[0-9a-f]+ " + ("False" if run == 0 else "True"), lines[0])
        assert re.fullmatch(r"ent_[0-9a-f]+ \['amount'\]", lines[1]), lines[1]
        assert lines[2] == "-0.0125"


class PaymentProvider:
    """A stub provider: ``POST /v1/charges`` makes a charge, and a request
    with an ``Idempotency-Key`` it has seen gets that charge again."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.charges: Dict[str, str] = {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = self.headers.get("Idempotency-Key", "")
                provider.requests.append({"path": self.path, "key": key, "body": json.loads(body)})
                charge = provider.charges.setdefault(key, f"ch_{len(provider.charges) + 1}")
                answer = json.dumps({"id": charge, "status": "succeeded"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider() -> Iterator[PaymentProvider]:
    stub = PaymentProvider()
    yield stub
    stub.close()


def test_the_intents_example_runs(
    server: TallyServer, api_key: str, provider: PaymentProvider
) -> None:
    code = first_python_block("## Intents")
    assert 'headers={"Idempotency-Key": lease.intent_id}' in code
    code = code.replace("https://api.payments.example", provider.base_url)
    with tally.Client(server.base_url, api_key) as client:
        for run in range(2):  # the second run replays the stored outcome
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, "README.md intents", "exec"), {"client": client})
            assert out.getvalue().splitlines() == [f"succeeded ch_1 {run == 1}"]
        assert provider.requests == [
            {
                "path": "/v1/charges",
                "key": "inv_2026_0042",
                "body": {"customer": "cust_42", "amount": "49.00", "currency": "usd"},
            }
        ], "charged once, with the intent ID as the idempotency key"
        assert client.get_balance("cust_42").posted == Decimal("49.00")
        stored = client.get_intent("inv_2026_0042")
        assert stored.status == "succeeded" and stored.result == {"charge_id": "ch_1"}
        assert stored.params == {
            "customer": "cust_42", "amount": Decimal("49.00"), "currency": "USD",
        }  # fmt: skip
