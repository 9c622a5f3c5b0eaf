#!/usr/bin/env bash
# Installs the locked dev dependencies and runs the whole suite: tsc build,
# type-level checks, and node --test against real `tally serve` processes.
# TALLY_BIN names the server binary (default ../../target/debug/tally);
# TALLY_TEST_POSTGRES_URL adds PostgreSQL; TALLY_REQUIRE_POSTGRES=1 makes
# its absence a failure. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm test
