#!/bin/sh
# CI gate of ONNX conformance: every test named in tests/onnx/expected-pass.txt must still
# pass. Runs npu-onnx-test over those tests only, on a private npud it starts and restarts
# after a crash (so one crash costs only the test behind it), and fails listing each listed
# test that no longer passes, with the runner's reason. Anything the runner writes to stderr
# (an npud crash or timeout, npud's unclean exit, leaks under ASan, sanitizer reports) fails
# the gate too.
#   usage: tests/onnx/check-expected.sh BUILD      (ONNX_DATA overrides the test data root;
#          ONNX_ACCUMULATE=float64 or mixed loads every model with that accumulation)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
LIST=$HERE/expected-pass.txt
DATA=${ONNX_DATA:-/usr/share/libonnx-testdata/data}/node
RUNNER=$BUILD/bin/npu-onnx-test

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
[ -x "$RUNNER" ] && [ -x "$BUILD/bin/npud" ] || fail "$RUNNER or $BUILD/bin/npud not built"

tmp=$(mktemp -d /tmp/npu-onnx-check-XXXXXX) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

dirs=
missing=
for n in $names; do
        if [ -d "$DATA/$n" ]; then dirs="$dirs $DATA/$n"; else missing="$missing $n"; fi
done

rc=0
if [ -n "$dirs" ]; then
        # shellcheck disable=SC2086 # one argument per test directory
        NPUD_BIN=$BUILD/bin/npud "$RUNNER" --start-npud --accumulate "${ONNX_ACCUMULATE:-float32}" $dirs \
                >"$tmp/out" 2>"$tmp/err" || rc=$?
fi

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
if [ -s "$tmp/err" ]; then
        cat "$tmp/err"
        echo "onnx: FAIL: npu-onnx-test reported the problems above"
        status=1
fi
if [ "$rc" -ne 0 ]; then
        echo "onnx: FAIL: npu-onnx-test exited with status $rc"
        status=1
fi
if [ "$bad" -ne 0 ]; then
        echo "onnx: FAIL: $bad of $total expected-pass tests no longer pass (tests/onnx/expected-pass.txt)"
        status=1
fi
[ "$status" -eq 0 ] && echo "onnx: all $total expected-pass tests pass (accumulate ${ONNX_ACCUMULATE:-float32})"
exit "$status"
