#!/usr/bin/env bash
# The Python and TypeScript SDKs' suites, each against real `tally serve`
# processes: the command README.md gives besides `cargo test --workspace`,
# and what CI runs. Needs python3 (>= 3.9, with venv) and Node.js >= 20;
# their packages come from PyPI and the npm registry.
#
# TALLY_BIN names the server binary; without it this checkout's debug
# build is made and used. TALLY_TEST_POSTGRES_URL adds PostgreSQL (as for
# cargo test), and TALLY_REQUIRE_POSTGRES=1 makes its absence a failure.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${TALLY_BIN:-}" ]]; then
    (cd "$repo" && cargo build -q -p tally-api --bin tally)
    export TALLY_BIN="$repo/target/debug/tally"
fi

echo "== Python SDK (sdk/python)"
"$repo/sdk/python/run-tests.sh"
echo "== TypeScript SDK (sdk/typescript)"
"$repo/sdk/typescript/run-tests.sh"
