#!/bin/sh
# CI gate of ONNX conformance: every test named in tests/onnx/expected-pass.txt must still
# pass. Runs npu-onnx-test over those tests only, on an npud this script starts itself (so
# that npud's own exit status, leaks under ASan included, is checked too), and fails listing
# each listed test that no longer passes, with the runner's reason.
#   usage: tests/onnx/check-expected.sh BUILD      (ONNX_DATA overrides the test data root)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
LIST=$HERE/expected-pass.txt
DATA=${ONNX_DATA:-/usr/share/libonnx-testdata/data}/node
RUNNER=$BUILD/bin/npu-onnx-test
NPUD=$BUILD/bin/npud

fail() { echo "onnx: FAIL: $*"; exit 1; }

[ -f "$LIST" ] || fail "$LIST missing"
# the list is kept sorted and unique so that regenerating it gives readable diffs
LC_ALL=C sort -u "$LIST" | cmp -s - "$LIST" || fail "$LIST is not sorted and unique (LC_ALL=C sort -u)"
names=$(grep -v '^[[:space:]]*$' "$LIST")
if [ -z "$names" ]; then
        echo "onnx: expected-pass list is empty"
        exit 0
fi
[ -d "$DATA" ] || fail "no test data at $DATA (make deps installs libonnx-testdata)"
[ -x "$RUNNER" ] && [ -x "$NPUD" ] || fail "$RUNNER or $NPUD not built"

tmp=$(mktemp -d /tmp/npu-onnx-check-XXXXXX) || fail "mktemp"
pid=
cleanup() {
        [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
        rm -rf "$tmp"
}
trap cleanup EXIT

dirs=
missing=
for n in $names; do
        if [ -d "$DATA/$n" ]; then dirs="$dirs $DATA/$n"; else missing="$missing $n"; fi
done

"$NPUD" --socket "$tmp/npud.sock" --sim-devices 1 --log-level warn >"$tmp/npud.log" 2>&1 &
pid=$!
i=0
while [ ! -S "$tmp/npud.sock" ]; do
        kill -0 "$pid" 2>/dev/null || { cat "$tmp/npud.log"; pid=; fail "npud did not start"; }
        i=$((i + 1))
        [ $i -le 1000 ] || fail "npud did not create its socket in 10 s"
        sleep 0.01
done

rc=0
if [ -n "$dirs" ]; then
        # shellcheck disable=SC2086 # one argument per test directory
        "$RUNNER" --socket "$tmp/npud.sock" $dirs >"$tmp/out" 2>"$tmp/err" || rc=$?
fi
kill -TERM "$pid"
wait "$pid"
npud_rc=$?
pid=

bad=0
for n in $missing; do
        echo "onnx: $n: listed but not in $DATA"
        bad=$((bad + 1))
done
for n in $names; do
        case " $missing " in *" $n "*) continue ;; esac
        grep -qx "$n: pass" "$tmp/out" && continue
        line=$(grep -m1 "^$n: " "$tmp/out")
        echo "onnx: ${line:-$n: not run}"
        bad=$((bad + 1))
done

total=$(echo "$names" | wc -l)
status=0
if [ "$rc" -ne 0 ]; then
        cat "$tmp/err"
        echo "onnx: FAIL: npu-onnx-test exited with status $rc"
        status=1
fi
if [ "$npud_rc" -ne 0 ]; then
        cat "$tmp/npud.log"
        echo "onnx: FAIL: npud exited with status $npud_rc"
        status=1
fi
if [ "$bad" -ne 0 ]; then
        echo "onnx: FAIL: $bad of $total expected-pass tests no longer pass (tests/onnx/expected-pass.txt)"
        status=1
fi
[ "$status" -eq 0 ] && echo "onnx: all $total expected-pass tests pass"
exit "$status"
