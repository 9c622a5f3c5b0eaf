#!/usr/bin/env bash
# End-to-end tests of the finance console (/console) in headless Chromium
# from Debian's packages, driven by playwright-core (no browser download).
# Needs: node >= 18, npm, /usr/bin/chromium (or CHROMIUM_BIN), a built
# tally binary (TALLY_BIN; without it this checkout's debug build is made
# and used). Optional:
# TALLY_TEST_POSTGRES_URL to run against a fresh PostgreSQL database.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${TALLY_BIN:-}" ]]; then
  # Like sdk/run-tests.sh: this checkout's debug server unless one is named.
  (cd ../.. && cargo build -q -p tally-api --bin tally)
  TALLY_BIN="$(cd ../.. && pwd)/target/debug/tally"
fi
export TALLY_BIN
export CHROMIUM_BIN="${CHROMIUM_BIN:-/usr/bin/chromium}"
if [ ! -x "$TALLY_BIN" ]; then echo "run-tests.sh: no tally binary at $TALLY_BIN" >&2; exit 1; fi
if [ ! -x "$CHROMIUM_BIN" ]; then echo "run-tests.sh: no Chromium at $CHROMIUM_BIN (apt-get install -y chromium)" >&2; exit 1; fi
npm ci --no-audit --no-fund
rm -rf screenshots
node --test --test-concurrency=1 --test-reporter=spec ./*.test.js
