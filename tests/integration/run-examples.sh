#!/bin/sh
# Run the client examples against a fresh npud on a temporary socket; fail if any fails or
# if npud does not exit cleanly.
set -eu
build=${1:-build}
dir=$(mktemp -d /tmp/npud-examples-XXXXXX)
sock=$dir/npud.sock
"$build/bin/npud" --socket "$sock" --sim-devices 1 --log-level warn 2>"$dir/log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
i=0
while [ ! -S "$sock" ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i + 1)); done
for ex in "$build"/bin/example-*; do
        echo "== $ex"
        "$ex" "$sock"
done
"$build/bin/npuctl" --socket "$sock" devices
kill -TERM $pid
if ! wait $pid; then
        echo "npud did not exit cleanly:" >&2
        cat "$dir/log" >&2
        exit 1
fi
