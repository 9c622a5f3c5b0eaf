#!/usr/bin/env bash
# The fault suite can fail (docs/reliability.md, "The suite can fail").
#
# Copies this checkout (tracked and untracked files, as they are now) to
# target/fault-demo/src, applies mutations there (the patches in this
# folder), builds that copy and runs tests/faults.rs against it, once per
# engine. The real sources and target/debug are never touched.
#
#   scripts/fault-demo/run.sh [MUTATION...] [sqlite|postgres...]
#   scripts/fault-demo/run.sh --control [sqlite|postgres...]
#
# MUTATION: forget-keys (the server forgets every existing idempotency
# key), no-unique-key (the schema loses the UNIQUE key). Default: both.
# Passes (exit 0) only if the suite goes red on every engine, for the
# reason it exists: a double post when the UNIQUE key is gone, requests
# never acknowledged when it is kept (the database refuses the double post
# and the broken server can only answer 5xx). --control applies nothing
# and passes only if the suite is green: the copy and its build alone
# make nothing red. Exit 1: the suite missed the mutant (or failed the
# control), or went red for another reason. Exit 2: a patch no longer
# applies or the copy does not build (docs/reliability.md says how to
# remake a patch).
#
# Both engines by default; PostgreSQL at TALLY_TEST_POSTGRES_URL
# (default postgres://postgres@127.0.0.1:5432/test), required.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work="$repo/target/fault-demo"
src="$work/src"

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

control=
mutations=()
engines=()
for arg in "$@"; do
    case "$arg" in
        --control) control=1 ;;
        sqlite | postgres) engines+=("$arg") ;;
        -*) usage ;;
        *) [ -f "$here/$arg.patch" ] || usage; mutations+=("$arg") ;;
    esac
done
[ ${#engines[@]} -gt 0 ] || engines=(sqlite postgres)
if [ -n "$control" ]; then
    [ ${#mutations[@]} -eq 0 ] || usage
elif [ ${#mutations[@]} -eq 0 ]; then
    mutations=(forget-keys no-unique-key)
fi
case " ${mutations[*]} " in
    *" no-unique-key "*) expected='two different answers for|double-posted|a late replay differed' ;;
    *) expected='never acknowledged' ;;
esac

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
for m in "${mutations[@]}"; do
    if ! git -C "$src" apply --whitespace=nowarn "$here/$m.patch"; then
        echo "fault-demo: $m.patch no longer applies to this code: remake it (docs/reliability.md)" >&2
        exit 2
    fi
done
if [ -n "$control" ]; then
    what="the unmutated copy (control)"
else
    what="the mutant (${mutations[*]})"
fi
echo "fault-demo: building $what"

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
    echo "fault-demo: $what does not build (docs/reliability.md)" >&2
    exit 2
fi

status=0
for engine in "${engines[@]}"; do
    log="$work/$engine.log"
    echo "fault-demo: the fault suite on $engine against $what (log: $log)"
    started=$SECONDS
    if cargo test -p tally-api --test faults -- "$engine::" >"$log" 2>&1; then
        if [ -n "$control" ]; then
            echo "fault-demo: green as expected on $engine after $((SECONDS - started)) s"
        else
            echo "fault-demo: FAILED on $engine: the fault suite passed against $what" >&2
            status=1
        fi
        continue
    fi
    if [ -n "$control" ]; then
        echo "fault-demo: FAILED on $engine: $what went red:" >&2
        grep -A3 'panicked at' "$log" >&2 || tail -n 20 "$log" >&2
        status=1
    elif caught=$(grep -E -m1 "$expected" "$log"); then
        echo "fault-demo: red as expected on $engine after $((SECONDS - started)) s: $caught"
    else
        echo "fault-demo: FAILED on $engine: red, but not for the mutation (expected /$expected/):" >&2
        grep -A3 'panicked at' "$log" >&2 || tail -n 20 "$log" >&2
        status=1
    fi
done
exit $status
