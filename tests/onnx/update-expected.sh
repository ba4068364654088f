#!/bin/sh
# Regenerate tests/onnx/expected-pass.txt, the CI gate's list, from a full conformance run:
# every test that passed in it, sorted (LC_ALL=C), one per line. Tests the old list had and
# the run did not pass are named, since dropping them hides a regression.
#   usage: make conformance && tests/onnx/update-expected.sh [BUILD | FILE.json]
set -eu
arg=${1:-build}
if [ -d "$arg" ]; then json=$arg/conformance.json; else json=$arg; fi
HERE=$(cd "$(dirname "$0")" && pwd)
LIST=$HERE/expected-pass.txt
[ -f "$json" ] || { echo "update-expected: $json missing; run make conformance first" >&2; exit 1; }

new=$(mktemp /tmp/expected-pass-XXXXXX)
trap 'rm -f "$new"' EXIT
python3 - "$json" >"$new" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    run = json.load(f)
for name in sorted({t["name"] for t in run["tests"] if t.get("status") == "pass"}):
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
