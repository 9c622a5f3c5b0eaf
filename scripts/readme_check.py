#!/usr/bin/env python3
"""Runs README.md's commands exactly as written, so the README cannot rot.

    scripts/readme_check.py test-command   print the README's test command (.ci/run runs it)
    scripts/readme_check.py walkthrough    start the server with the README's own
                                           command, run every later ```sh block of
                                           the README against it, check each curl's
                                           answer against the README's comment

The README's first ```sh block holds the two newcomer commands: the line with
`serve` starts the server, the line with `cargo test` runs the tests. Every
later ```sh block is run, in order, in one bash (`set -euo pipefail`), from the
repository's root, against that server.

What a curl is expected to answer is read from the README itself: the first
comment line after the curl (before the next curl) that starts with a status,
`# HTTP/1.1 201 …` or `# 409 …`, gives the status; without one the answer must
be 2xx. Every `"field":"value"` pair in that comment (values without `…`) must
appear in the answer's body, and `Idempotent-Replayed: true` in the comment
must be a header of the answer. Any command that fails stops the run.

Why a script and not a Rust test: it must run the README's text, in a shell,
the way a newcomer pastes it; a Rust test would run its own copy.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
HEALTH_URL = "http://127.0.0.1:8080/healthz"
# The first `cargo run --release` builds the binary: minutes on a 2-core machine.
SERVER_START_TIMEOUT_S = 30 * 60

CURL_LINE = re.compile(r"(^|\$\(|;|&&|\|\|)\s*curl\s")
STATUS_COMMENT = re.compile(r"^\s*#\s*(?:HTTP/1\.[01]\s+)?([1-5]\d\d)\b")
STRING_PAIR = re.compile(r'"([A-Za-z_]+)":"([^"…]*)"')


def fail(message: str) -> None:
    print(f"README CHECK FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def sh_blocks(text: str) -> list[str]:
    blocks, current, inside = [], [], False
    for line in text.splitlines():
        if not inside and line.strip() == "```sh":
            inside, current = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(current))
        elif inside:
            current.append(line)
    if inside:
        fail("README.md has an unterminated ```sh block")
    return blocks


def command_of(line: str) -> str:
    """The command of a newcomer line, without its trailing comment."""
    return line.split(" #", 1)[0].strip()


def newcomer_commands(blocks: list[str]) -> tuple[str, str]:
    if not blocks:
        fail("README.md has no ```sh block")
    lines = [l for l in blocks[0].splitlines() if l.strip() and not l.lstrip().startswith("#")]
    serve = [command_of(l) for l in lines if " serve" in l]
    test = [command_of(l) for l in lines if "cargo test" in l]
    if len(serve) != 1 or len(test) != 1:
        fail("the README's first ```sh block must hold one serve command and one test command")
    return serve[0], test[0]


def expectations(script: str) -> list[dict]:
    """One expectation per curl call of the walk-through, in order."""
    lines = script.splitlines()
    starts = [i for i, l in enumerate(lines) if not l.lstrip().startswith("#") and CURL_LINE.search(l)]
    result = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        expected = {"status": None, "pairs": [], "replayed": False, "line": lines[start].strip()}
        for line in lines[start + 1 : end]:
            m = STATUS_COMMENT.match(line)
            if m:
                expected["status"] = int(m.group(1))
                expected["pairs"] = STRING_PAIR.findall(line)
                expected["replayed"] = "Idempotent-Replayed: true" in line
                break
        result.append(expected)
    return result


# Every curl of the walk-through goes through this function: the answer is
# printed as curl would, and its status, headers and body are kept for the check.
CURL_WRAPPER = r"""
__readme_n=0
curl() {
    __readme_n=$((__readme_n + 1))
    local d="$README_CHECK_DIR/$__readme_n"
    mkdir -p "$d"
    command curl -sS -D "$d/head" -o "$d/body" -w '%{http_code}' "$@" > "$d/status"
    cat "$d/body"; echo
}
"""


def wait_for_server(proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"the README's serve command exited with {proc.returncode} before answering /healthz")
        try:
            with urllib.request.urlopen(HEALTH_URL, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    fail(f"the server did not answer {HEALTH_URL} within {SERVER_START_TIMEOUT_S} s")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def check_answers(expected: list[dict], answers: Path) -> None:
    made = sorted((p for p in answers.iterdir() if p.is_dir()), key=lambda p: int(p.name))
    if len(made) != len(expected):
        fail(f"the walk-through made {len(made)} curl calls, the README shows {len(expected)}")
    for n, (want, got) in enumerate(zip(expected, made), start=1):
        status = int((got / "status").read_text().strip() or 0)
        body = (got / "body").read_text(errors="replace")
        head = (got / "head").read_text(errors="replace")
        where = f"curl #{n} ({want['line'][:70]})"
        if want["status"] is None:
            if not 200 <= status < 300:
                fail(f"{where}: answered {status}, expected 2xx\n{body}")
        elif status != want["status"]:
            fail(f"{where}: answered {status}, the README says {want['status']}\n{body}")
        if want["pairs"]:
            try:
                document = json.loads(body[body.find("{"):])
            except ValueError:
                fail(f"{where}: the answer is not JSON\n{body}")
            for field, value in want["pairs"]:
                if str(document.get(field)) != value:
                    fail(f"{where}: {field} is {document.get(field)!r}, the README says {value!r}\n{body}")
        if want["replayed"] and not re.search(r"(?im)^idempotent-replayed:\s*true\s*$", head):
            fail(f"{where}: no Idempotent-Replayed: true header\n{head}")
        print(f"ok  curl #{n}: {status}  {want['line'][:70]}")


def walkthrough() -> None:
    blocks = sh_blocks(README.read_text())
    serve, _ = newcomer_commands(blocks)
    steps = "\n\n".join(blocks[1:])
    expected = expectations(steps)
    if not expected:
        fail("the README has no curl walk-through")
    for leftover in ("tally.db", "tally.db-wal", "tally.db-shm"):
        if (ROOT / leftover).exists():
            fail(f"{leftover} already exists in {ROOT}: the README's server would not start empty; move it away first")

    print(f"$ {serve}", flush=True)
    server = subprocess.Popen(serve, shell=True, cwd=ROOT, start_new_session=True)
    try:
        wait_for_server(server)
        with tempfile.TemporaryDirectory() as answers:
            script = "set -euo pipefail\n" + CURL_WRAPPER + steps + "\n"
            env = dict(os.environ, README_CHECK_DIR=answers)
            run = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env)
            if run.returncode != 0:
                fail(f"a walk-through command exited with {run.returncode}")
            print()
            check_answers(expected, Path(answers))
    finally:
        stop(server)
        for made in ("tally.db", "tally.db-wal", "tally.db-shm"):
            (ROOT / made).unlink(missing_ok=True)
    print(f"README walk-through: {len(expected)} curl calls answered as the README says")


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "test-command":
        print(newcomer_commands(sh_blocks(README.read_text()))[1])
    elif what == "walkthrough":
        walkthrough()
    else:
        fail(__doc__ or "usage: readme_check.py test-command | walkthrough")


if __name__ == "__main__":
    main()
