"""README.md's quickstart is ten lines that run: executed against a real
server (its URL put in), on a tenant of its own."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from .tallyserver import TallyServer

README = Path(__file__).resolve().parents[1] / "README.md"


def quickstart() -> str:
    text = README.read_text()
    section = text[text.index("## Quickstart") :]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match is not None, "README.md has no python block under ## Quickstart"
    return match.group(1)


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
