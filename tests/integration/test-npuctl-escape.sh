#!/bin/sh
# npuctl never passes terminal control sequences through (issue 9, item 13). A client names
# itself (comm) with ESC/BEL sequences and a UTF-8-encoded C1 CSI; then every listing that
# shows it (sessions, mem, device show, top; table, plain, CSV, --watch) and the other
# listings must contain only printable ASCII and newlines, with the escaped form (\x1b,
# \u009b) in place, and --json must carry the exact name JSON-escaped. Daemon error messages
# (which quote what the client sent) and echoed arguments are escaped too, invalid UTF-8
# included. (Tenant names cannot hold control characters: npud's configuration refuses them.)
# A client whose name is not valid UTF-8 (byte 0xff) is still listed by sessions and mem,
# with '?' for the bad byte (npud makes comm valid UTF-8 when it reads it).
# Usage: test-npuctl-escape.sh BUILD_DIR
set -u
build=${1:-build}
npud=$build/bin/npud
npuctl=$build/bin/npuctl
hold=$build/tests/npuctl-hold
dir=$(mktemp -d /tmp/npud-npuctl-esc-XXXXXX)
sock=$dir/npud.sock
conf=$dir/npud.conf
fails=0
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
# show FILE: the start of FILE with every byte visible
show() { od -c "$1" | head -20 | sed 's/^/    /'; }
# clean FILE WHAT: FILE holds only printable ASCII and newlines (no ESC, BEL, C1, raw UTF-8)
clean() {
        n=$(LC_ALL=C tr -d '\n\040-\176' <"$1" | wc -c)
        [ "$n" = 0 ] && pass "$2: no control bytes" || { fail "$2: $n control or non-ASCII bytes"; show "$1"; }
}
# has FILE TEXT WHAT: FILE contains TEXT (fixed string)
has() { grep -qF -- "$2" "$1" && pass "$3" || { fail "$3: no '$2'"; show "$1"; }; }
# run WHAT npuctl-args...: run npuctl, expecting exit 0; stdout in $dir/out, stderr in $dir/err
run() {
        what=$1; shift
        "$npuctl" --socket "$sock" "$@" >"$dir/out" 2>"$dir/err"
        r=$?
        [ $r = 0 ] || { fail "$what: exit $r"; sed 's/^/    /' "$dir/err" | head -5; }
        clean "$dir/out" "$what"
        clean "$dir/err" "$what (stderr)"
}
until_ok() {
        t=$(( $1 * 20 )); shift
        while [ $t -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; t=$((t - 1)); done
        return 1
}

for f in "$npud" "$npuctl" "$hold" "$build/bin/example-matmul"; do
        [ -x "$f" ] || { echo "FAIL: $f is missing (make all first)"; exit 1; }
done
command -v python3 >/dev/null || { echo "FAIL: python3 is missing"; exit 1; }

# comm: "e" ESC[2J (clear screen) U+009B (CSI as UTF-8) "m" ESC]0;x BEL (set title): 14 bytes
comm=$(printf 'e\033[2J\302\233m\033]0;x\007')
comm_esc='e\x1b[2J\u009bm\x1b]0;x\x07'
echo "{\"tenants\": [{\"name\": \"ops\", \"class\": \"normal\", \"uids\": [$(id -u)]}]}" >"$conf"

"$npud" --socket "$sock" --config "$conf" --sim-devices 2 --log-level warn 2>"$dir/npud.log" &
npud_pid=$!; pids="$pids $npud_pid"
until_ok 10 "$npuctl" --socket "$sock" version || { echo "FAIL: npud did not start"; cat "$dir/npud.log"; exit 1; }
"$hold" --name "$comm" "$sock" 1 1048576 120 >"$dir/hold.out" 2>&1 &
hold_pid=$!; pids="$pids $hold_pid"
until_ok 10 grep -q ready "$dir/hold.out" || { echo "FAIL: npuctl-hold did not allocate: $(cat "$dir/hold.out")"; exit 1; }
[ "$(cat /proc/$hold_pid/comm)" = "$comm" ] && pass "the client's comm holds the sequences" \
        || fail "comm not set: $(od -c /proc/$hold_pid/comm)"
# a second client, on device 0, whose name is not valid UTF-8
"$hold" --name "$(printf 'bad\377name')" "$sock" 0 65536 120 >"$dir/hold2.out" 2>&1 &
hold2_pid=$!; pids="$pids $hold2_pid"
until_ok 10 grep -q ready "$dir/hold2.out" || { echo "FAIL: npuctl-hold (0xff) did not allocate: $(cat "$dir/hold2.out")"; exit 1; }
"$build/bin/example-matmul" "$sock" >/dev/null 2>&1 || fail "example-matmul (load for sched and top)"

# listings that show the process name, and the others
run "sessions" sessions
has "$dir/out" "$comm_esc" "sessions shows the escaped comm"
run "sessions --csv" sessions --csv --fields id,comm
has "$dir/out" "$comm_esc" "sessions CSV has the escaped comm"
run "sessions --watch" sessions --watch 0.1 --count 2
has "$dir/out" "$comm_esc" "sessions --watch shows the escaped comm"
run "mem" mem
has "$dir/out" "$comm_esc" "mem shows the escaped comm"
run "mem 1 --csv" mem 1 --csv
run "device show 1" device show 1
has "$dir/out" "$comm_esc" "device show shows the escaped comm"
run "device show 1 --csv" device show 1 --csv
run "top" top --count 1
has "$dir/out" "$comm_esc" "top shows the escaped comm"
run "devices" devices
run "health" health
run "tenants" tenants
run "tenants --csv" tenants --csv
run "quota show" quota show
run "sched" sched
run "version" version

# --json: nothing raw reaches the terminal, and the exact name survives JSON escaping
for args in "sessions" "mem" "device show 1" "tenants" "sched" "top --count 1"; do
        # shellcheck disable=SC2086
        run "$args --json" --json $args
done
"$npuctl" --socket "$sock" --json sessions >"$dir/out" 2>&1
python3 -c "import json,sys
j=json.load(open(sys.argv[1]))
assert any(s['comm'] == sys.argv[2] for s in j), [s['comm'] for s in j]" "$dir/out" "$comm" 2>"$dir/pyerr" \
        && pass "sessions JSON carries the exact comm" || { fail "sessions JSON: $(tail -1 "$dir/pyerr")"; show "$dir/out"; }
"$npuctl" --socket "$sock" --json mem 1 >"$dir/out" 2>&1
python3 -c "import json,sys
d=json.load(open(sys.argv[1]))['devices'][0]
assert d['sessions'][0]['comm'] == sys.argv[2], d['sessions']" "$dir/out" "$comm" 2>"$dir/pyerr" \
        && pass "mem JSON carries the exact comm" || { fail "mem JSON: $(tail -1 "$dir/pyerr")"; show "$dir/out"; }

# the client named with byte 0xff: listed (not dropped), its name made valid UTF-8
"$npuctl" --socket "$sock" --json sessions >"$dir/out" 2>&1
python3 -c "import json,sys
j=json.load(open(sys.argv[1]))
m=[s for s in j if s['pid'] == int(sys.argv[2])]
assert m and m[0]['comm'] == 'bad?name', m or [s['pid'] for s in j]" "$dir/out" "$hold2_pid" 2>"$dir/pyerr" \
        && pass "sessions JSON lists the 0xff-named client as bad?name" || { fail "sessions JSON (0xff): $(tail -1 "$dir/pyerr")"; show "$dir/out"; }
"$npuctl" --socket "$sock" --json mem 0 >"$dir/out" 2>&1
python3 -c "import json,sys
d=json.load(open(sys.argv[1]))['devices'][0]
m=[s for s in d['sessions'] if s['pid'] == int(sys.argv[2])]
assert m and m[0]['comm'] == 'bad?name' and m[0]['bytes'] >= 65536, d['sessions']" "$dir/out" "$hold2_pid" 2>"$dir/pyerr" \
        && pass "mem JSON lists the 0xff-named client as bad?name" || { fail "mem JSON (0xff): $(tail -1 "$dir/pyerr")"; show "$dir/out"; }
run "sessions (0xff client)" sessions
has "$dir/out" "bad?name" "sessions shows the 0xff-named client"
run "mem 0 (0xff client)" mem 0
has "$dir/out" "bad?name" "mem shows the 0xff-named client"

# messages from the daemon (they quote what was sent) and echoed arguments
bad=$(printf 'z\033[2J')
"$npuctl" --socket "$sock" quota set "$bad" 1G >"$dir/out" 2>"$dir/err"
[ $? = 1 ] && pass "quota set of an unknown tenant fails" || fail "quota set of an unknown tenant did not fail"
clean "$dir/err" "daemon error message"
has "$dir/err" 'z\x1b[2J' "daemon error message escaped"
"$npuctl" --socket "$sock" quota show "$bad" >"$dir/out" 2>"$dir/err"
clean "$dir/err" "quota show of an unknown tenant"
has "$dir/err" 'z\x1b[2J' "quota show names the unknown tenant escaped"
"$npuctl" --socket "$sock" "$(printf 'x\233\377\033y')" >"$dir/out" 2>"$dir/err"
clean "$dir/err" "unknown command (C1 byte, invalid UTF-8)"
has "$dir/err" 'x\x9b\xff\x1by' "unknown command escaped byte by byte"
"$npuctl" --socket "$sock" sessions --fields "$(printf 'id,\342\200\256x')" >"$dir/out" 2>"$dir/err"
clean "$dir/err" "unknown field (U+202E)"
has "$dir/err" '\u202ex' "bidirectional override escaped"
"$npuctl" --socket "$sock" quota set 'a\x1b' 1G >"$dir/out" 2>"$dir/err"
has "$dir/err" 'a\\x1b' "a backslash is escaped, so the escaped form cannot be forged"
"$npuctl" --socket "$sock" quota set "$(printf 'caf\303\251')" 1G >"$dir/out" 2>"$dir/err"
grep -q "$(printf 'caf\303\251')" "$dir/err" && pass "UTF-8 letters stay" || { fail "UTF-8 letters changed"; show "$dir/err"; }

kill "$hold_pid" "$hold2_pid" 2>/dev/null
kill "$npud_pid" 2>/dev/null
wait "$npud_pid" 2>/dev/null
if [ $fails -gt 0 ]; then echo "test-npuctl-escape: $fails failure(s)"; exit 1; fi
echo "test-npuctl-escape: all passed"
