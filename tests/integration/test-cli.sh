#!/bin/sh
# Command-line behaviour of npud and npuctl, socket handling, and make install:
#   usage errors and bad config keys exit 2 naming the key; a stale socket file is replaced,
#   a live one is not; the socket is mode 0660; npuctl output and exit codes; an installed
#   libnpu builds a client through pkg-config.
set -u
build=${1:-build}
npud=$build/bin/npud
npuctl=$build/bin/npuctl
dir=$(mktemp -d /tmp/npud-cli-XXXXXX)
fails=0
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

expect_exit() { # expected-code description command...
        want=$1; what=$2; shift 2
        "$@" >"$dir/out" 2>"$dir/err"
        got=$?
        if [ "$got" = "$want" ]; then pass "$what"; else fail "$what: exit $got, expected $want"; cat "$dir/err"; fi
}

expect_exit 0 "npud --version" "$npud" --version
grep -q "npud " "$dir/out" || fail "npud --version prints the version"
expect_exit 0 "npud --help" "$npud" --help
expect_exit 2 "unknown option" "$npud" --bogus
grep -q -- "--bogus" "$dir/err" || fail "unknown option is named"
expect_exit 2 "bad profile" "$npud" --sim-profile 999X
expect_exit 2 "bad device count" "$npud" --sim-devices many
expect_exit 2 "relative --tuning-cache" "$npud" --tuning-cache cache.txt
grep -q -- "--tuning-cache: must be an absolute path" "$dir/err" || fail "--tuning-cache named: $(cat "$dir/err")"
printf '{"tuning_cache": 7}' >"$dir/badtune.conf"
expect_exit 2 "tuning_cache not a path" "$npud" --config "$dir/badtune.conf"
grep -q "tuning_cache: must be an absolute path" "$dir/err" || fail "tuning_cache named: $(cat "$dir/err")"
printf '{"graph_accumulate": "float16"}' >"$dir/badacc.conf"
expect_exit 2 "graph_accumulate not float32, float64 or mixed" "$npud" --config "$dir/badacc.conf"
grep -q 'graph_accumulate: must be "float32", "float64" or "mixed"' "$dir/err" || fail "graph_accumulate named: $(cat "$dir/err")"
printf '{"realtime_loop": "yes"}' >"$dir/badrt.conf"
expect_exit 2 "realtime_loop not a boolean" "$npud" --config "$dir/badrt.conf"
grep -q "realtime_loop: must be true or false" "$dir/err" || fail "realtime_loop named: $(cat "$dir/err")"
printf '{"cpu_wake_latency_us": -2}' >"$dir/badwake.conf"
expect_exit 2 "cpu_wake_latency_us below -1" "$npud" --config "$dir/badwake.conf"
grep -q "cpu_wake_latency_us: must be an integer from -1 to 2000000000" "$dir/err" \
        || fail "cpu_wake_latency_us named: $(cat "$dir/err")"
printf '{"limits": {"max_bufers": 3}}' >"$dir/bad.conf"
expect_exit 2 "unknown config key" "$npud" --config "$dir/bad.conf"
grep -q "limits.max_bufers" "$dir/err" && pass "config key named" || fail "config key not named: $(cat "$dir/err")"
printf '{"sim": {"devices": "two"}}' >"$dir/bad2.conf"
expect_exit 2 "wrong config type" "$npud" --config "$dir/bad2.conf"
grep -q "sim.devices" "$dir/err" || fail "sim.devices not named: $(cat "$dir/err")"
printf '{"sim": {"share_workers": 1}}' >"$dir/badshare.conf"
expect_exit 2 "sim.share_workers not a boolean" "$npud" --config "$dir/badshare.conf"
grep -q "sim.share_workers: must be true or false" "$dir/err" || fail "sim.share_workers named: $(cat "$dir/err")"
printf '{"sim": ' >"$dir/bad3.conf"
expect_exit 2 "config not JSON" "$npud" --config "$dir/bad3.conf"
expect_exit 2 "missing config file" "$npud" --config "$dir/none.conf"
printf '{"admin_group": "no-such-group-npud"}' >"$dir/bad4.conf"
expect_exit 2 "admin_group naming a missing group" "$npud" --check-config="$dir/bad4.conf"
grep -q "admin_group: no group 'no-such-group-npud'" "$dir/err" && pass "missing admin group named" \
        || fail "missing admin group: $(cat "$dir/err")"
printf '{"sim": {"devices": 2}, "tenants": [{"name": "a", "devices": [0, 5]}]}' >"$dir/bad5.conf"
expect_exit 2 "tenant devices naming a missing device" "$npud" --check-config="$dir/bad5.conf"
grep -q "tenants\[name=a\].devices: no device 5" "$dir/err" && pass "missing tenant device named" \
        || fail "missing tenant device: $(cat "$dir/err")"
printf '{"tenants": [{"name": "a", "devices": [1]}]}' >"$dir/bad6.conf"
expect_exit 2 "tenant device beyond --sim-devices" "$npud" --config "$dir/bad6.conf" --sim-devices 1
grep -q "tenants\[name=a\].devices: no device 1" "$dir/err" || fail "--sim-devices 1: $(cat "$dir/err")"
# The example names npuadm, which this host may lack.
sed "s/\"npuadm\"/\"$(id -gn)\"/" docs/npud.conf.example >"$dir/example.conf"
expect_exit 0 "the shipped example configuration is valid" "$npud" --check-config="$dir/example.conf"
python3 -c "import json,sys
keys = set(json.load(open(sys.argv[1])))
want = {'socket', 'log_level', 'workers', 'admin_group', 'sim', 'limits', 'metrics', 'tenants',
        'scheduler', 'memory', 'dbus', 'telemetry', 'tuning_cache', 'realtime_loop', 'graph_accumulate',
        'cpu_wake_latency_us'}
assert keys == want, want ^ keys" docs/npud.conf.example 2>"$dir/err" \
        && pass "the example configuration sets every section" || fail "example: $(cat "$dir/err")"

# A stale socket file (nothing listening) is replaced.
sock=$dir/npud.sock
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$sock"
[ -S "$sock" ] || fail "could not create a stale socket"
"$npud" --socket "$sock" --sim-devices 1 --log-level warn 2>"$dir/npud.log" &
pid=$!; pids="$pids $pid"
i=0; while ! "$npuctl" --socket "$sock" version >/dev/null 2>&1 && [ $i -lt 200 ]; do sleep 0.02; i=$((i + 1)); done
"$npuctl" --socket "$sock" version >/dev/null 2>&1 && pass "stale socket replaced" || fail "npud did not replace a stale socket"
mode=$(stat -c %a "$sock")
[ "$mode" = 660 ] && pass "socket mode 0660" || fail "socket mode $mode"
# The loop thread (the main thread) runs at SCHED_FIFO 1 as root, nice -10 or unchanged
# otherwise; the host workers (normal and SCHED_IDLE) never inherit it.
cls=$(ps -L -o tid=,cls=,rtprio= -p $pid | awk -v p=$pid '$1 == p {print $2 "/" $3}')
others=$(ps -L -o tid=,cls= -p $pid | awk -v p=$pid '$1 != p {print $2}' | sort -u | tr '\n' ' ')
if [ "$(id -u)" = 0 ]; then
        [ "$cls" = FF/1 ] && pass "loop thread at SCHED_FIFO 1" || fail "loop thread class $cls"
fi
case "$others" in
*FF*|*RR*) fail "a worker inherited the loop thread's policy: $others" ;;
*) pass "workers at normal or idle policy ($others)" ;;
esac
# A live socket is not taken over.
expect_exit 1 "second npud on a live socket" "$npud" --socket "$sock" --sim-devices 1
grep -q "another npud" "$dir/err" || fail "live socket message: $(cat "$dir/err")"

# npuctl
expect_exit 0 "npuctl devices" "$npuctl" --socket "$sock" devices
grep -q "910B3" "$dir/out" || fail "devices table lists the profile"
expect_exit 0 "npuctl --json devices" "$npuctl" --socket "$sock" --json devices
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[0]['profile']=='910B3'" "$dir/out" \
        && pass "devices JSON parses" || fail "devices JSON"
expect_exit 0 "npuctl --json sessions" "$npuctl" --socket "$sock" --json sessions
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/out" || fail "sessions JSON"
expect_exit 2 "npuctl unknown command" "$npuctl" --socket "$sock" frobnicate
expect_exit 3 "npuctl without npud" "$npuctl" --socket "$dir/nothing.sock" devices
# Other users' sessions are visible to root and the admin group only (SO_PEERCRED).
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
        chmod 0666 "$sock"
        chmod o+rx "$dir"
        # a session of nobody's own to see (npuctl leaves out the one it lists through)
        setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "import socket,time,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(3)" "$sock" &
        holder=$!
        sleep 0.3
        setpriv --reuid=65534 --regid=65534 --clear-groups "$npuctl" --socket "$sock" --json sessions >"$dir/nobody.json" 2>"$dir/err" \
                && python3 -c "import json,sys; l=json.load(open(sys.argv[1])); assert l and all(s['uid']==65534 for s in l), l" "$dir/nobody.json" \
                && pass "unprivileged npuctl sees only its own sessions" || fail "unprivileged sessions view: $(cat "$dir/err" "$dir/nobody.json")"
        "$npuctl" --socket "$sock" --json sessions >"$dir/root.json" \
                && python3 -c "import json,sys; l=json.load(open(sys.argv[1])); assert any(s['uid']==65534 and s['comm'].startswith('python') for s in l), l" "$dir/root.json" \
                && pass "root sees other sessions" || fail "root sessions view: $(cat "$dir/root.json")"
        kill $holder 2>/dev/null
fi
kill -TERM $pid
wait $pid && pass "npud exits 0 on SIGTERM" || { fail "npud exit status"; cat "$dir/npud.log"; }
[ -e "$sock" ] && fail "socket file left behind" || pass "socket removed at exit"

# --watch as a log (-l, nvidia-smi's spelling): --csv gives one header and a timestamp column;
# an npud restart under it is a line on stderr, not the end (exit 3) of the log.
lsock=$dir/log.sock
"$npud" --socket "$lsock" --sim-devices 2 --log-level warn 2>"$dir/log-npud.log" &
lpid=$!; pids="$pids $lpid"
i=0; while ! "$npuctl" --socket "$lsock" version >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
"$npuctl" --socket "$lsock" devices --csv --fields id,health -l 0.2 --count 30 >"$dir/log.csv" 2>"$dir/log.err" &
wpid=$!
sleep 1
kill -TERM $lpid; wait $lpid
sleep 0.7
"$npud" --socket "$lsock" --sim-devices 2 --log-level warn 2>>"$dir/log-npud.log" &
lpid=$!; pids="$pids $lpid"
wait $wpid; rc=$?
[ $rc = 0 ] && pass "watch log survives an npud restart (exit 0 after --count)" || { fail "watch log exit $rc"; cat "$dir/log.err"; }
[ "$(grep -c '^timestamp,id,health$' "$dir/log.csv")" = 1 ] && [ "$(head -1 "$dir/log.csv")" = timestamp,id,health ] \
        && pass "watch log: one CSV header, with a timestamp column" || { fail "watch log header"; head -3 "$dir/log.csv"; }
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z,1,ok$' "$dir/log.csv" \
        && pass "watch log rows carry an ISO 8601 UTC timestamp" || { fail "watch log rows"; head -3 "$dir/log.csv"; }
grep -q "lost npud; reconnecting" "$dir/log.err" && grep -q "reconnected to npud" "$dir/log.err" \
        && pass "watch log says when npud went away and when it is back" || { fail "watch log lines"; cat "$dir/log.err"; }
[ "$(grep -c "lost npud" "$dir/log.err")" = 1 ] && pass "one line while npud is down, not one per try" \
        || { fail "lines while down"; cat "$dir/log.err"; }
n=$(grep -c ',1,ok$' "$dir/log.csv")
[ "$n" -gt 2 ] && pass "rows logged before and after the restart ($n)" || fail "only $n rows"
kill -TERM $lpid; wait $lpid
expect_exit 2 "-l needs seconds" "$npuctl" --socket "$lsock" devices -l soon
grep -q "is not a number of seconds" "$dir/err" || fail "-l soon: $(cat "$dir/err")"

# make install into a DESTDIR, then build a client against it with pkg-config.
if make -s install BUILD="$build" PREFIX=/usr DESTDIR="$dir/root" >"$dir/install.log" 2>&1; then
        # Libraries and the pkg-config file in the multiarch directory.
        ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch)
        libdir=$dir/root/usr/lib/$ma
        [ -f "$libdir/libnpu.so.1" ] && [ -L "$libdir/libnpu.so" ] && [ -f "$libdir/pkgconfig/libnpu.pc" ] \
                && grep -q "^libdir=/usr/lib/$ma\$" "$libdir/pkgconfig/libnpu.pc" \
                && pass "libnpu in /usr/lib/$ma" || fail "libnpu not in /usr/lib/$ma: $(find "$dir/root" -name 'libnpu*')"
        PKG_CONFIG_SYSROOT_DIR="$dir/root" PKG_CONFIG_PATH="$libdir/pkgconfig" \
                cc -o "$dir/matmul" client/examples/matmul.c \
                $(PKG_CONFIG_SYSROOT_DIR="$dir/root" PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs libnpu) -lm \
                && pass "client builds against the installed libnpu" || fail "build against installed libnpu"
        [ -x "$dir/root/usr/sbin/npud" ] && [ -x "$dir/root/usr/bin/npuctl" ] || fail "installed binaries"
        nm -D --defined-only "$libdir/libnpu.so.1" | awk '{print $3}' | grep -v '^npu_' | grep -v '^LIBNPU' \
                | grep -q . && fail "libnpu exports non-API symbols" || pass "libnpu exports only npu_*"
else
        fail "make install"; cat "$dir/install.log"
fi

[ $fails = 0 ] && echo "cli: all checks passed" || echo "cli: $fails check(s) failed"
[ $fails = 0 ]
