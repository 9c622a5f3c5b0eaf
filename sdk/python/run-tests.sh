#!/usr/bin/env bash
# The Python SDK's checks: a virtual environment with ./sdk/python[test],
# mypy --strict on the package, then pytest against real `tally serve`
# processes. Exits non-zero on any failure.
#
#   TALLY_BIN=target/debug/tally sdk/python/run-tests.sh [pytest args…]
#
# TALLY_BIN defaults to target/debug/tally of this checkout. With
# TALLY_TEST_POSTGRES_URL set the suite also runs on PostgreSQL
# (TALLY_REQUIRE_POSTGRES=1: fail rather than skip without it).
# TALLY_SDK_VENV overrides where the environment lives (default sdk/python/.venv).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${TALLY_SDK_VENV:-$here/.venv}"
python="${PYTHON:-python3}"

if [[ -n "${TALLY_BIN:-}" && -e "$TALLY_BIN" ]]; then
  TALLY_BIN="$(cd "$(dirname "$TALLY_BIN")" && pwd)/$(basename "$TALLY_BIN")"
  export TALLY_BIN
fi

if [[ ! -x "$venv/bin/python" ]]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
# A regular (non-editable) install: the tests import what `pip install` ships.
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$here"
"$venv/bin/python" -m pip install --quiet "$here[test]"

echo "== mypy --strict"
(cd "$here" && "$venv/bin/python" -m mypy --strict src/tally)

echo "== pytest"
cd "$here"
exec "$venv/bin/python" -m pytest -p no:cacheprovider "$@"
