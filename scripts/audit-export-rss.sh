#!/usr/bin/env bash
# Constant memory of the audit export (docs/audit.md, "Constant memory").
#
# Fills a fresh SQLite ledger with ENTRIES usage debits (POST /v1/batch,
# 1,000 operations per request), then exports the first 10,000, 100,000
# and all ENTRIES entries three ways and prints the peak resident memory
# of each: the server answering GET /v1/audit/export (restarted before
# each export, VmHWM from /proc), `tally export` and `tally verify
# --export` (both "Maximum resident set size" of /usr/bin/time -v).
#
# Not part of the test suite (it takes minutes):
#   scripts/audit-export-rss.sh [ENTRIES]        default 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
cargo build --release -p tally-api --quiet
TALLY=$PWD/target/release/tally
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
export TALLY_LOG=warn
DB="sqlite://$WORK/ledger.db"
"$TALLY" signing-key generate --seed-file "$WORK/seed" >/dev/null
KEY=$("$TALLY" keys create --database-url "$DB" --tenant acme --scopes post,audit)

start_server() {
    : >"$WORK/server.out"
    "$TALLY" serve --database-url "$DB" --listen 127.0.0.1:0 \
        --signing-key-file "$WORK/seed" >"$WORK/server.out" 2>>"$WORK/server.err" &
    SERVER_PID=$!
    for _ in $(seq 1 300); do
        grep -q "listening" "$WORK/server.out" && break
        sleep 0.1
    done
    BASE=$(sed -n 's/^tally listening on //p' "$WORK/server.out")
}
stop_server() {
    kill "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}
kib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
status_kib() { awk -v f="$2" '$1 == f":" { print $2 }' "/proc/$1/status"; }
max_rss() { awk -F': ' '/Maximum resident set size/ { print $2 }' "$1"; }
elapsed() { awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$1"; }

start_server
echo "filling $N entries through POST /v1/batch on $BASE …"
started=$(date +%s)
python3 - "$BASE" "$KEY" "$N" <<'PY'
import json, sys, urllib.request
base, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for start in range(0, n, 1000):
    ops = [{"type": "usage_debit", "usage_record_id": f"ur_{i}",
            "account": f"cust_{i % 1000}", "amount": "0.01", "unit": "USD",
            "meter": "tokens", "quantity": "10", "metadata": {"batch": str(start)}}
           for i in range(start, min(n, start + 1000))]
    req = urllib.request.Request(
        base + "/v1/batch", data=json.dumps({"operations": ops}).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        body = json.load(r)
        assert all(x["status"] == 201 for x in body["results"]), body["results"][:1]
PY
echo "filled in $(($(date +%s) - started)) s"
stop_server

printf '\n%-10s %-9s %-40s %-26s %-26s\n' entries file "server (GET /v1/audit/export)" "tally export" "tally verify --export"
for n in 10000 100000 "$N"; do
    [ "$n" -le "$N" ] || continue
    start_server
    sleep 0.5
    before=$(status_kib "$SERVER_PID" VmRSS)
    t0=$(date +%s.%N)
    curl -sf -H "Authorization: Bearer $KEY" "$BASE/v1/audit/export?to_seq=$n" -o "$WORK/api.jsonl"
    took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f s", b - a }')
    server_peak=$(status_kib "$SERVER_PID" VmHWM)
    stop_server
    /usr/bin/time -v "$TALLY" export --database-url "$DB" --tenant acme --to-seq "$n" \
        --signing-key-file "$WORK/seed" --output "$WORK/cli.jsonl" 2>"$WORK/export.time"
    /usr/bin/time -v "$TALLY" verify --export "$WORK/cli.jsonl" >"$WORK/verify.out" 2>"$WORK/verify.time"
    grep -q "verify OK" "$WORK/verify.out"
    cmp -s <(sed '1d;$d' "$WORK/api.jsonl") <(sed '1d;$d' "$WORK/cli.jsonl") || {
        echo "the endpoint and tally export differ in their entry lines" >&2
        exit 1
    }
    size=$(du -m "$WORK/cli.jsonl" | cut -f1)
    printf '%-10s %-9s %-40s %-26s %-26s\n' "$n" "${size} MiB" \
        "$(kib "$before") -> peak $(kib "$server_peak") in $took" \
        "$(kib "$(max_rss "$WORK/export.time")") in $(elapsed "$WORK/export.time")" \
        "$(kib "$(max_rss "$WORK/verify.time")") in $(elapsed "$WORK/verify.time")"
done
