#!/bin/sh
# ABI check of libnpu: check-abi.sh BUILD_DIR
#
# Compares the dynamic symbols that BUILD_DIR/lib/libnpu.so.1 defines (name and version node,
# as `nm -D --defined-only --with-symbol-versions` shows them) with the committed list
# tests/abi/libnpu.symbols, and checks that every function declared in client/include/npu.h and
# npu-admin.h (the public headers) is exported. Fails when
#   - a listed symbol is missing or carries another version (an ABI break: callers linked
#     against libnpu.so.1 would no longer load),
#   - the library exports a symbol that is not listed (add it deliberately, under a version
#     node, to client/libnpu.map and tests/abi/libnpu.symbols),
#   - the SONAME is not libnpu.so.1,
#   - a function of npu.h is not exported.
set -eu

BUILD=${1:?usage: check-abi.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIB=$BUILD/lib/libnpu.so.1
LIST=$ROOT/tests/abi/libnpu.symbols
HEADERS="$ROOT/client/include/npu.h $ROOT/client/include/npu-admin.h"
CC=${CC:-cc}

[ -f "$LIB" ] || { echo "check-abi: $LIB not built" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

fail=0

# Defined dynamic symbols, name@@VERSION (the version-node symbols themselves, type A, left out).
nm -D --defined-only --with-symbol-versions "$LIB" |
        awk '$2 != "A" { print $3 }' | LC_ALL=C sort > "$tmp/actual"
grep -v '^#' "$LIST" | grep -v '^[[:space:]]*$' | LC_ALL=C sort > "$tmp/expected"

# Listed but missing or with another version.
LC_ALL=C comm -23 "$tmp/expected" "$tmp/actual" > "$tmp/missing"
# Exported but not listed.
LC_ALL=C comm -13 "$tmp/expected" "$tmp/actual" > "$tmp/extra"

while read -r sym; do
        name=${sym%%@*}
        now=$(grep "^$name@" "$tmp/actual" || true)
        if [ -n "$now" ]; then
                echo "check-abi: FAIL: $sym changed version: the library exports $now" >&2
        else
                echo "check-abi: FAIL: $sym disappeared from $LIB (ABI break)" >&2
        fi
        fail=1
done < "$tmp/missing"

while read -r sym; do
        name=${sym%%@*}
        grep -q "^$name@" "$tmp/expected" && continue # reported above as a version change
        echo "check-abi: FAIL: $LIB exports $sym, which tests/abi/libnpu.symbols does not list;" \
             "if it is deliberate public API, declare it in npu.h, list it in client/libnpu.map" \
             "and add '$sym' to tests/abi/libnpu.symbols" >&2
        fail=1
done < "$tmp/extra"

soname=$(objdump -p "$LIB" | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" != "libnpu.so.1" ]; then
        echo "check-abi: FAIL: SONAME is '$soname', expected libnpu.so.1" >&2
        fail=1
fi

# Every function declared in npu.h (the compiler lists the prototypes: -aux-info, GCC) is
# exported. Without GCC, a textual scan of the header.
printf '#include "npu.h"\n#include "npu-admin.h"\n' > "$tmp/h.c"
if "$CC" -std=gnu11 -I"$ROOT/client/include" -fsyntax-only -aux-info "$tmp/aux" "$tmp/h.c" \
        2>/dev/null && [ -s "$tmp/aux" ]; then
        grep -E 'npu(-admin)?\.h:' "$tmp/aux" |
                sed -E 's/.*[ *]([A-Za-z_][A-Za-z0-9_]*) \(.*/\1/' > "$tmp/declared.raw"
else
        # shellcheck disable=SC2086
        cat $HEADERS | sed -E 's#/\*.*\*/##' |
                grep -oE '^[A-Za-z_][A-Za-z0-9_ ]*[ *]+(npu_[a-z0-9_]+)\(' |
                sed -E 's/.*[ *](npu_[a-z0-9_]+)\($/\1/' > "$tmp/declared.raw"
fi
LC_ALL=C sort -u "$tmp/declared.raw" > "$tmp/declared"
if [ ! -s "$tmp/declared" ]; then
        echo "check-abi: FAIL: found no function declared in $HEADERS" >&2
        fail=1
fi
sed 's/@.*//' "$tmp/actual" | LC_ALL=C sort -u > "$tmp/exported"
for name in $(LC_ALL=C comm -23 "$tmp/declared" "$tmp/exported"); do
        echo "check-abi: FAIL: $name is declared in a public header but $LIB does not export it" \
             "(list it in client/libnpu.map and tests/abi/libnpu.symbols)" >&2
        fail=1
done

if [ "$fail" -ne 0 ]; then
        echo "check-abi: libnpu ABI check failed" >&2
        exit 1
fi
echo "check-abi: libnpu.so.1 exports the $(wc -l < "$tmp/actual") listed symbols;" \
     "$(wc -l < "$tmp/declared") functions of npu.h and npu-admin.h all exported"
