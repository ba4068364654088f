#!/bin/sh
# Regenerate tests/onnx/expected-pass.txt, the CI gate's list, from conformance runs: the
# tests that passed in every run given (e.g. a plain and an ASan build, so that the list
# holds under `make check-asan` too), sorted (LC_ALL=C), one per line. Listed tests that no
# longer qualify are named, since dropping them hides a regression.
#   usage: make conformance && tests/onnx/update-expected.sh [BUILD | FILE.json]...
#          (default: build, i.e. build/conformance.json)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
LIST=$HERE/expected-pass.txt
[ $# -gt 0 ] || set -- build
runs=
for arg in "$@"; do
        if [ -d "$arg" ]; then json=$arg/conformance.json; else json=$arg; fi
        [ -f "$json" ] || { echo "update-expected: $json missing; run make conformance first" >&2; exit 1; }
        runs="$runs $json"
done

new=$(mktemp /tmp/expected-pass-XXXXXX)
trap 'rm -f "$new"' EXIT
# shellcheck disable=SC2086 # one argument per run
python3 - $runs >"$new" <<'PY'
import json, sys
passed = None
for path in sys.argv[1:]:
    with open(path) as f:
        run = {t["name"] for t in json.load(f)["tests"] if t.get("status") == "pass"}
    passed = run if passed is None else passed & run
for name in sorted(passed):
    print(name)
PY

touch "$LIST"
dropped=$(LC_ALL=C comm -23 "$LIST" "$new")
added=$(LC_ALL=C comm -13 "$LIST" "$new" | wc -l)
if [ -n "$dropped" ]; then
        echo "update-expected: these listed tests did not pass and are dropped:"
        echo "$dropped" | sed 's/^/  /'
fi
cp "$new" "$LIST"
echo "update-expected: $(wc -l <"$LIST") tests listed ($added added, $(printf '%s' "$dropped" | grep -c .) dropped)"
