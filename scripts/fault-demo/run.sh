#!/usr/bin/env bash
# The fault suite can fail (docs/reliability.md, "The suite can fail").
#
# Copies this checkout (tracked and untracked files, as they are now) to
# target/fault-demo/src, applies the mutations in this folder there — a
# tally that forgets every existing idempotency key, and by default a
# schema without the UNIQUE key that would still refuse the double post —
# builds that copy and runs tests/faults.rs against it, once per engine.
# The real sources are never touched.
#
# Passes (exit 0) only if the suite goes red on every engine, for the reason
# it exists: a double post (default), or intents never acknowledged because
# the database refused the double post (--keep-unique). Exit 1: the suite
# missed the broken server, or went red for another reason. Exit 2: the
# mutation no longer applies or the mutant does not build (update the
# patches, see docs/reliability.md).
#
#   scripts/fault-demo/run.sh [--keep-unique] [sqlite|postgres]...
#
# Both engines by default; PostgreSQL at TALLY_TEST_POSTGRES_URL
# (default postgres://postgres@127.0.0.1:5432/test), required.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work="$repo/target/fault-demo"
src="$work/src"

keep_unique=
engines=()
for arg in "$@"; do
    case "$arg" in
        --keep-unique) keep_unique=1 ;;
        sqlite | postgres) engines+=("$arg") ;;
        *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
[ ${#engines[@]} -gt 0 ] || engines=(sqlite postgres)

patches=("$here/forget-keys.patch")
if [ -n "$keep_unique" ]; then
    expected='never acknowledged'
else
    patches+=("$here/no-unique-key.patch")
    expected='two different answers for|double-posted|a late replay differed'
fi

# A fresh copy every run: the mutant is always today's code plus the
# mutation, and every workspace crate is rebuilt (the dependencies are not).
rm -rf "$src"
mkdir -p "$src"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
    while IFS= read -r -d '' f; do
        if [ -f "$repo/$f" ]; then printf '%s\0' "$f"; fi
    done |
    (cd "$repo" && xargs -0 cp --parents -t "$src" --)
# Its own repository, so that `git apply` patches the copy and never the
# checkout it lies in; the unmutated copy is committed there, so that
# `git -C target/fault-demo/src diff` shows the mutant and can remake a
# patch that no longer applies.
git -C "$src" init -q
git -C "$src" add -A
git -C "$src" -c user.name=fault-demo -c user.email=fault-demo@localhost \
    -c commit.gpgsign=false commit -q -m "unmutated copy"
for p in "${patches[@]}"; do
    if ! git -C "$src" apply --whitespace=nowarn "$p"; then
        echo "fault-demo: $(basename "$p") no longer applies to this code: update it (docs/reliability.md)" >&2
        exit 2
    fi
done
echo "fault-demo: mutant = this checkout + ${patches[*]##*/}"

# Its own target directory: the mutant's `tally` must never replace the
# checkout's target/debug/tally, which the regular tests run.
export CARGO_TARGET_DIR="$work/target"
# Seeded once from the checkout's own build: the dependencies' artifacts do
# not depend on where the workspace lies, so cargo reuses them and builds
# only the workspace crates (seconds of copying instead of minutes of
# compiling them all again).
if [ ! -d "$CARGO_TARGET_DIR/debug/deps" ] && [ -d "$repo/target/debug/deps" ]; then
    echo "fault-demo: seeding $CARGO_TARGET_DIR from target/debug"
    mkdir -p "$CARGO_TARGET_DIR/debug"
    cp -a "$repo/target/debug/deps" "$repo/target/debug/build" "$repo/target/debug/.fingerprint" \
        "$CARGO_TARGET_DIR/debug/"
fi
export TALLY_TEST_POSTGRES_URL="${TALLY_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export TALLY_REQUIRE_POSTGRES=1
cd "$src"
if ! cargo test -p tally-api --test faults --no-run; then
    echo "fault-demo: the mutant does not build: update the patches (docs/reliability.md)" >&2
    exit 2
fi

status=0
for engine in "${engines[@]}"; do
    log="$work/$engine.log"
    echo "fault-demo: the fault suite on $engine against the mutant (log: $log)"
    started=$SECONDS
    if cargo test -p tally-api --test faults -- "$engine::" >"$log" 2>&1; then
        echo "fault-demo: FAILED on $engine: the fault suite passed against a server that forgets existing keys" >&2
        status=1
        continue
    fi
    if caught=$(grep -E -m1 "$expected" "$log"); then
        echo "fault-demo: red as expected on $engine after $((SECONDS - started)) s: $caught"
    else
        echo "fault-demo: FAILED on $engine: red, but not for a forgotten key (expected /$expected/):" >&2
        grep -A3 'panicked at' "$log" >&2 || tail -n 20 "$log" >&2
        status=1
    fi
done
exit $status
