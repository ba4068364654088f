#!/bin/sh
# npuctl against a real npud on a temporary socket, with two configured tenants and load from
# the examples and a memory-holding client (npuctl-hold): every command's table, --json
# (parsed with python3), --csv --fields output and exit code; unknown devices, sessions and
# tenants named in the error; drain/undrain, fault inject/clear and reset as seen by health,
# devices and the examples; session kill; quotas; reload with a good and a broken file (the
# old configuration stays); exit 4 for an unprivileged admin call; top and --watch; bash
# completion; the man pages format without a warning and install. Anything missing fails.
set -u
build=${1:-build}
npud=$build/bin/npud
npuctl=$build/bin/npuctl
hold=$build/tests/npuctl-hold
dir=$(mktemp -d /tmp/npud-npuctl-XXXXXX)
sock=$dir/npud.sock
conf=$dir/npud.conf
fails=0
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# expect_exit CODE WHAT npuctl-args...: run npuctl on the test socket; output in $dir/out, $dir/err
expect_exit() {
        want=$1; what=$2; shift 2
        "$npuctl" --socket "$sock" "$@" >"$dir/out" 2>"$dir/err"
        got=$?
        if [ "$got" = "$want" ]; then pass "$what"; else
                fail "$what: exit $got, expected $want"; sed 's/^/    /' "$dir/err" "$dir/out" | head -20; fi
}
# out_has TEXT WHAT / err_has TEXT WHAT: the last command's stdout / stderr contains TEXT
out_has() { grep -q -- "$1" "$dir/out" && pass "$2" || { fail "$2: no '$1' in output"; sed 's/^/    /' "$dir/out" | head -20; }; }
err_has() { grep -q -- "$1" "$dir/err" && pass "$2" || { fail "$2: no '$1' in: $(cat "$dir/err")"; }; }
# py WHAT CODE: run python CODE with j = the last command's stdout parsed as JSON
py() {
        what=$1; code=$2
        if python3 -c "import json,sys
j=json.load(open(sys.argv[1]))
$code" "$dir/out" 2>"$dir/pyerr"; then pass "$what"; else
                fail "$what"; sed 's/^/    /' "$dir/pyerr" | tail -3; sed 's/^/    /' "$dir/out" | head -20; fi
}
# pyraw WHAT CODE: run python CODE on the last command's stdout (sys.argv[1]), not parsed
pyraw() {
        what=$1; code=$2
        if python3 -c "import sys
$code" "$dir/out" 2>"$dir/pyerr"; then pass "$what"; else
                fail "$what"; sed 's/^/    /' "$dir/pyerr" | tail -3; sed 's/^/    /' "$dir/out" | head -20; fi
}
# until_ok SECONDS CMD...: retry CMD until it succeeds
until_ok() {
        t=$(( $1 * 20 )); shift
        while [ $t -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; t=$((t - 1)); done
        return 1
}

for f in "$npud" "$npuctl" "$hold" "$build/bin/example-matmul" "$build/bin/example-two_streams"; do
        [ -x "$f" ] || { echo "FAIL: $f is missing (make all first)"; exit 1; }
done
command -v python3 >/dev/null || { echo "FAIL: python3 is missing"; exit 1; }
root=0; [ "$(id -u)" = 0 ] && root=1

# ---- man pages and completion (no daemon needed) ----
for m in docs/man/npud.8 docs/man/npuctl.8 docs/man/npud.conf.5 docs/man/libnpu.3; do
        if [ ! -f "$m" ]; then fail "$m missing"; continue; fi
        if ! command -v groff >/dev/null; then fail "groff missing (make deps)"; continue; fi
        groff -man -Tutf8 -ww -z "$m" >"$dir/man.err" 2>&1
        [ ! -s "$dir/man.err" ] && pass "$m formats without warnings" || { fail "$m warnings:"; head "$dir/man.err"; }
        if command -v man >/dev/null; then
                MANWIDTH=80 man --warnings -l "$m" >"$dir/man.txt" 2>"$dir/man.err"
                [ -s "$dir/man.txt" ] && [ ! -s "$dir/man.err" ] && pass "man -l $m" || { fail "man -l $m:"; head "$dir/man.err"; }
        fi
done
# every function of npu.h and npu-admin.h is in libnpu(3)
python3 -c "import re,sys
fns=re.findall(r'^[A-Za-z][\w \*]*?\b(npu_\w+)\(', open(sys.argv[1]).read() + open(sys.argv[3]).read(), re.M)
man=open(sys.argv[2]).read()
missing=[f for f in fns if f + '(' not in man]
assert len(fns) > 40 and not missing, 'libnpu.3 lacks: ' + ' '.join(missing)" client/include/npu.h docs/man/libnpu.3 client/include/npu-admin.h 2>"$dir/err" \
        && pass "libnpu.3 documents every function of npu.h and npu-admin.h" || fail "$(tail -1 "$dir/err")"
# every option and configuration key the code knows is in npud(8) / npud.conf(5)
python3 -c "import re,sys
def text(p): return open(p).read().replace('\\\\-', '-')
cfg=open('daemon/api/config.c').read(); pol=open('policy/policy.c').read()
opts=re.findall(r'\{ \"([a-z-]+)\", (?:required|no|optional)_argument', cfg)
keys=set()
for block in re.findall(r'keys\[\] = \{([^}]*)\}', cfg + pol):
        keys.update(re.findall(r'\"(\w+)\"', block))
m8=text('docs/man/npud.8'); m5=text('docs/man/npud.conf.5')
bad=[o for o in opts if '--' + o not in m8] + [k for k in sorted(keys) if not re.search(r'\b' + k + r'\b', m5)]
assert len(opts) > 8 and len(keys) > 20 and not bad, 'undocumented: ' + ' '.join(bad)" 2>"$dir/err" \
        && pass "npud.8 and npud.conf.5 cover every option and key" || fail "$(tail -1 "$dir/err")"
# every command npuctl --help lists is in the man page and the completion
"$npuctl" --help >"$dir/help" 2>&1 || fail "npuctl --help"
for c in devices device top health sessions session mem drain undrain reset fault tenants quota sched reload topo diag version; do
        grep -q "^  $c" "$dir/help" || fail "npuctl --help lacks $c"
        grep -qw -- "$c" docs/man/npuctl.8 || fail "npuctl.8 lacks $c"
        grep -qw -- "$c" client/completion/npuctl.bash || fail "completion lacks $c"
done
comp=client/completion/npuctl.bash
complete_words() { # words...: the completions bash offers for the last word
        bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
                 PATH="$NPUCTL_DIR:$PATH" _npuctl; printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@" 2>&1
}
export NPUCTL_DIR=$(cd "$(dirname "$npuctl")" && pwd)
bash -n "$comp" && pass "completion parses" || fail "completion syntax"
[ "$(complete_words npuctl fa)" = fault ] && pass "completes commands" || fail "completion of 'fa': $(complete_words npuctl fa)"
[ "$(complete_words npuctl fault inject 0 fail-d)" = fail-device ] && pass "completes fault kinds" \
        || fail "completion of fault kinds: $(complete_words npuctl fault inject 0 fail-d)"
complete_words npuctl --cs | grep -q -- --csv && pass "completes options" || fail "completion of --cs"
[ "$(complete_words npuctl sessions --fields ten)" = tenant ] && pass "completes --fields names" \
        || fail "completion of --fields ten: $(complete_words npuctl sessions --fields ten)"
[ "$(complete_words npuctl devices --fields id,na)" = id,name ] && pass "completes the next --fields name after a comma" \
        || fail "completion of --fields id,na: $(complete_words npuctl devices --fields id,na)"
"$npuctl" --version >"$dir/out" 2>&1 && grep -Eq '^npuctl [0-9]+\.[0-9]+\.[0-9]+ \(libnpu ' "$dir/out" \
        && pass "npuctl --version needs no npud" || fail "npuctl --version: $(cat "$dir/out")"
"$npuctl" sessions --fields help >"$dir/out" 2>&1 && grep -qx started "$dir/out" && grep -qx comm "$dir/out" \
        && pass "--fields help lists the fields" || fail "--fields help: $(cat "$dir/out")"

# ---- npud with two tenants: root's sessions are "lc" ----
cat >"$conf" <<'EOF'
{"tenants": [{"name": "lc", "class": "latency-critical", "uids": [0]},
             {"name": "batch", "class": "best-effort", "weight": 2, "uids": [65534]}]}
EOF
"$npud" --socket "$sock" --config "$conf" --sim-devices 2 --log-level warn 2>"$dir/npud.log" &
npud_pid=$!; pids="$pids $npud_pid"
until_ok 10 "$npuctl" --socket "$sock" version || { echo "FAIL: npud did not start"; cat "$dir/npud.log"; exit 1; }

# usage errors and an unreachable daemon
expect_exit 2 "no command"
expect_exit 2 "unknown command" frobnicate
err_has frobnicate "unknown command named"
expect_exit 2 "drain without a device" drain
expect_exit 2 "drain of a non-number" drain zero
expect_exit 2 "unknown option" devices --bogus
expect_exit 2 "--json with --csv" --json --csv devices
expect_exit 2 "--watch on an action" --watch 1 drain 0
expect_exit 2 "--count without --watch" --count 2 devices
expect_exit 2 "unknown field" devices --csv --fields id,bogus
err_has bogus "unknown field named"
"$npuctl" --socket "$dir/none.sock" devices >/dev/null 2>&1; r=$?
[ $r = 3 ] && pass "unreachable npud: exit 3" || fail "unreachable npud: exit $r"

# load: the examples run on device 0; a client holds 1 MiB on device 1
"$build/bin/example-matmul" "$sock" >/dev/null 2>&1 && pass "example-matmul runs" || fail "example-matmul"
"$build/bin/example-two_streams" "$sock" >/dev/null 2>&1 && pass "example-two_streams runs" || fail "example-two_streams"
"$hold" "$sock" 1 1048576 300 >"$dir/hold.out" 2>&1 &
hold_pid=$!; pids="$pids $hold_pid"
until_ok 10 grep -q ready "$dir/hold.out" || fail "npuctl-hold did not allocate: $(cat "$dir/hold.out")"

# devices
expect_exit 0 "devices" devices
out_has 910B3 "devices table shows the profile"
out_has "Memory used / total" "devices table has the memory column"
expect_exit 0 "devices --json" devices --json
py "devices JSON" "assert [d['id'] for d in j] == [0, 1]; assert j[0]['tasks_completed'] > 0; assert j[1]['memory_used'] == 1048576; assert j[0]['draining'] is False"
expect_exit 0 "devices --csv --fields" --csv --fields id,health,memory_used devices
[ "$(cat "$dir/out")" = "id,health,memory_used
0,ok,0
1,ok,1048576" ] && pass "devices CSV has the fields in order" || fail "devices CSV: $(cat "$dir/out")"
expect_exit 0 "devices --fields (table)" devices --fields memory_used,id
out_has "Memory used" "devices --fields table heading"
expect_exit 0 "devices --csv" devices --csv
python3 -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); assert len(r)==2 and r[1]['memory_used']=='1048576' and r[0]['profile']=='910B3', r" "$dir/out" \
        && pass "devices CSV parses" || fail "devices CSV: $(cat "$dir/out")"

# device show
expect_exit 0 "device show 1" device show 1
out_has "NPU 1" "device show names the device"
out_has "npuctl-hold" "device show lists the session holding memory"
out_has "fragmentation" "device show gives fragmentation"
expect_exit 0 "device show --json" --json device show 1
py "device show JSON" "assert j['id'] == 1 and j['faults'] == [] and j['memory']['sessions'][0]['bytes'] == 1048576 and any(t['name'] == 'lc' for t in j['tenants'])"
expect_exit 0 "device show --csv --fields" device show 0 --csv --fields id,health
[ "$(cat "$dir/out")" = "id,health
0,ok" ] && pass "device show CSV" || fail "device show CSV: $(cat "$dir/out")"
expect_exit 1 "device show of an unknown device" device show 7
err_has "device 7" "unknown device is named"
expect_exit 2 "device without show" device 0

# sessions
expect_exit 0 "sessions" sessions
out_has npuctl-hold "sessions lists the client"
expect_exit 0 "sessions --json" --json sessions
py "sessions JSON" "h=[s for s in j if s['comm']=='npuctl-hold']; assert h and h[0]['buffer_bytes'] == 1048576"
expect_exit 0 "sessions --csv --fields" sessions --csv --fields comm,buffer_bytes
out_has "^npuctl-hold,1048576$" "sessions CSV row"
expect_exit 0 "sessions --csv tenant and start" sessions --csv --fields comm,tenant,started
pyraw "sessions: tenant, start time (Unix seconds), npuctl's own session hidden" "import time
rows=open(sys.argv[1]).read().split()
assert rows[0]=='comm,tenant,started', rows
h=[r.split(',') for r in rows[1:] if r.startswith('npuctl-hold,')]
assert h and h[0][1] in ('lc','batch','default') and abs(int(h[0][2]) - time.time()) < 600, h
assert not any(r.startswith('npuctl,') for r in rows[1:]), rows"
expect_exit 0 "sessions --json without npuctl's own" --json sessions
py "sessions JSON: tenant, started, no self" "assert all(not s['self'] and 'tenant' in s and s['started'] > 0 for s in j) and not any(s['comm']=='npuctl' for s in j)"
expect_exit 0 "sessions table" sessions
out_has "TENANT" "sessions table has a TENANT column"

# mem
expect_exit 0 "mem" mem
out_has "NPU 1: 1.0 MiB used" "mem shows device use"
out_has "npuctl-hold" "mem shows the session holding memory"
out_has "lc " "mem shows the tenant holding memory"
expect_exit 0 "mem 1 --json" mem 1 --json
py "mem JSON" "d=j['devices']; assert len(d)==1 and d[0]['id']==1 and d[0]['memory_used']==1048576; s=d[0]['sessions'][0]; assert s['comm']=='npuctl-hold' and s['tenant']=='lc' and s['bytes']==1048576; assert d[0]['tenants']==[{'name':'lc','bytes':1048576}]; assert 0 <= d[0]['fragmentation'] < 1 and d[0]['free_segments'] >= 1; assert j['all'] is True"
expect_exit 0 "mem --csv --fields" mem --csv --fields device,used,sessions
[ "$(cat "$dir/out")" = "device,used,sessions
0,0,0
1,1048576,1" ] && pass "mem CSV" || fail "mem CSV: $(cat "$dir/out")"
expect_exit 1 "mem of an unknown device" mem 5
err_has "device 5" "mem names the unknown device"

# tenants and quotas
expect_exit 0 "tenants" tenants
out_has "latency-critical" "tenants shows the class"
out_has "batch" "tenants lists the second tenant"
expect_exit 0 "tenants --json" tenants --json
py "tenants JSON" "t={x['name']:x for x in j['tenants']}; assert set(t)=={'default','lc','batch'}; assert t['lc']['memory_used']==1048576 and t['batch']['class']=='best-effort' and t['batch']['weight']==2"
expect_exit 0 "tenants --csv --fields" tenants --csv --fields name,class
out_has "^batch,best-effort$" "tenants CSV row"
expect_exit 0 "quota set (total)" quota set lc 2G
expect_exit 0 "quota set --device" quota set lc --device 1 1.5M
expect_exit 0 "tenants after quota set" --json tenants
py "quota shows in tenants" "t={x['name']:x for x in j['tenants']}; assert t['lc']['memory_quota_total']==2<<30 and t['lc']['memory_quota_per_device']==0, t['lc']"
py "quota set --device sets only that device" "t={x['name']:x for x in j['tenants']}; assert t['lc']['memory_quota_by_device']==[0, 1572864] and t['lc']['runtime_quotas']=={'total': 2<<30, 'devices': [{'device': 1, 'bytes': 1572864}]}, t['lc']"
expect_exit 0 "quota show lc" quota show lc
out_has "2.0 GiB" "quota show gives the total quota"
out_has "0:unlimited 1:1.5 MiB" "quota show gives the quota of each device"
expect_exit 0 "quota show --csv" quota show --csv
out_has "^lc,1048576,2147483648,0,0:0 1:1572864,total;device 1$" "quota show CSV: raw bytes, run-time quotas named"
# below what the tenant already holds (1 MiB on device 1): a warning, and the JSON says so
expect_exit 0 "quota set below usage" quota set lc --device 1 512K
err_has "warning: tenant 'lc' already uses 1048576 bytes (device 1)" "quota set below usage warns"
expect_exit 0 "quota set below usage --json" --json quota set lc --device 1 512K
py "quota set JSON flags the quota below usage" "assert j['below_usage'] is True and j['memory_used']==1048576 and 'warning' in j and j['device']==1, j"
expect_exit 0 "quota set above usage --json" --json quota set lc --device 1 1.5M
py "quota set JSON without warning" "assert j['below_usage'] is False and 'warning' not in j, j"
"$hold" "$sock" 1 1048576 0 >"$dir/hold2.out" 2>&1 && fail "allocation over the per-device quota succeeded" \
        || { grep -qi quota "$dir/hold2.out" && pass "per-device quota enforced" || fail "quota error: $(cat "$dir/hold2.out")"; }
expect_exit 0 "quota set unlimited" quota set lc --device 1 unlimited
expect_exit 1 "quota show of an unknown tenant" quota show nosuch
err_has nosuch "unknown tenant named (show)"
expect_exit 1 "quota set of an unknown tenant" quota set nosuch 1G
err_has nosuch "unknown tenant named (set)"
expect_exit 2 "quota set with a bad size" quota set lc 12X
expect_exit 1 "quota set on an unknown device" quota set lc --device 9 1G

# sched
expect_exit 0 "sched" sched
out_has "TARGET" "sched table"
expect_exit 0 "sched --json" sched --json
py "sched JSON" "lc=[t for t in j[0]['tenants'] if t['name']=='lc'][0]; assert lc['tasks'] > 0 and lc['engine_seconds'] > 0 and lc['share'] == 1.0 and lc['wait_p99_us'] >= lc['wait_p50_us'] >= 0"
expect_exit 0 "sched --csv --fields" sched --csv --fields device,tenant,share
out_has "^0,lc,1.000000$" "sched CSV row"

# CSV is raw numbers everywhere: no units, no percent signs, utilization a fraction 0..1
for cmd in devices health sessions mem tenants "quota show" sched "device show 0"; do
        # shellcheck disable=SC2086
        "$npuctl" --socket "$sock" --csv $cmd >"$dir/out" 2>"$dir/err" || { fail "$cmd --csv: $(cat "$dir/err")"; continue; }
        pyraw "$cmd --csv has raw numbers only" "
import csv, re
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows, 'no rows'
for r in rows:
    for k, v in r.items():
        assert not re.search(r'[0-9.] ?(B|KiB|MiB|GiB|TiB|%|us|ms|s)\\b|unlimited', v or ''), (k, v)"
done
expect_exit 0 "devices --csv utilization and memory" devices --csv --fields id,memory,memory_used,cube,vector,aicpu,dma
pyraw "CSV utilization is a fraction, memory raw bytes" "
import csv
for r in csv.DictReader(open(sys.argv[1])):
    assert r['memory'] == r['memory_used'] and int(r['memory']) >= 0, r
    for k in ('cube', 'vector', 'aicpu', 'dma'):
        assert 0.0 <= float(r[k]) <= 1.0, (k, r[k])"

# health, drain, undrain
expect_exit 0 "health" health
out_has "FAULTS" "health table"
if [ $root = 1 ]; then
        expect_exit 0 "drain 0" drain 0
        expect_exit 0 "health --json after drain" --json health
        py "health shows draining" "assert j[0]['draining'] is True and j[1]['draining'] is False and j[0]['health'] == 'ok'"
        expect_exit 0 "devices --json after drain" --json devices
        py "devices shows draining" "assert j[0]['draining'] is True"
        expect_exit 0 "devices table after drain" devices
        out_has "draining" "devices table shows draining"
        "$build/bin/example-matmul" "$sock" >/dev/null 2>&1 && fail "a drained device took a stream" || pass "drained device takes no new streams"
        expect_exit 0 "undrain 0" undrain 0
        expect_exit 0 "health --csv after undrain" health --csv --fields id,draining
        out_has "^0,0$" "undrained"
        expect_exit 1 "drain of an unknown device" drain 9
        err_has "device 9" "drain names the unknown device"
        expect_exit 0 "drain --json" --json drain 1
        py "drain --json answer" "assert j == {}"
        expect_exit 0 "undrain 1" undrain 1

        # faults
        expect_exit 0 "fault inject fail-device" fault inject 0 fail-device
        expect_exit 0 "health after fail-device" --json health
        py "health failed with the fault" "assert j[0]['health'] == 'failed' and j[0]['faults'] == [{'kind': 'fail-device', 'value': 1.0}]"
        expect_exit 0 "health table shows the fault" health
        out_has "fail-device" "health table names the fault"
        "$build/bin/example-matmul" "$sock" >/dev/null 2>&1 && fail "example-matmul ran on a failed device" || pass "example-matmul fails on a failed device"
        expect_exit 0 "fault clear" fault clear 0
        expect_exit 0 "reset" reset 0
        until_ok 10 sh -c "'$npuctl' --socket '$sock' --csv --fields health,draining,faults health | grep -q '^ok,0,\$'" \
                && pass "health ok after clear and reset" || fail "health after reset: $("$npuctl" --socket "$sock" health)"
        "$build/bin/example-matmul" "$sock" >/dev/null 2>&1 && pass "example-matmul runs again" || fail "example-matmul after reset"
        expect_exit 0 "fault inject fail-next" fault inject 1 fail-next 2
        expect_exit 0 "fault inject slow" fault inject 1 slow 3
        expect_exit 0 "health --csv with faults" health --csv --fields id,faults
        out_has "^1,fail-next=2;slow=3$" "health CSV lists the faults"
        expect_exit 0 "fault clear 1" fault clear 1
        "$npuctl" --socket "$sock" --json sched >"$dir/sched0"
        expect_exit 0 "fault inject fail-next on device 0" fault inject 0 fail-next
        "$build/bin/example-matmul" "$sock" >/dev/null 2>&1 && fail "fail-next did not fail a task" || pass "fail-next fails the next task"
        "$npuctl" --socket "$sock" --json sched >"$dir/out"
        py "sched counts one failure for one failed task" "
b=json.load(open('$dir/sched0'))
def f(x, k): return sum(t[k] for t in x[0]['tenants'] if t['name']=='lc')
assert f(j, 'failed') - f(b, 'failed') == 1, (f(j, 'failed'), f(b, 'failed'), f(j, 'cancelled'))
assert 'cancelled' in j[0]['tenants'][0]"
        expect_exit 0 "sched --csv has the cancelled column" sched --csv --fields tenant,failed,cancelled
        out_has "^lc,[0-9]*,[0-9]*$" "sched CSV failed and cancelled"
        expect_exit 0 "faults after fail-next" --json health
        py "fail-next consumed" "assert j[0]['faults'] == [] and j[0]['health'] == 'ok'"
        # HBM ECC errors through the fault path: counters, not faults in force
        expect_exit 0 "fault inject ecc-corrected 3" fault inject 1 ecc-corrected 3
        expect_exit 0 "fault inject ecc-uncorrected" fault inject 1 ecc-uncorrected
        expect_exit 0 "devices CSV with ECC counters" devices --csv --fields id,ecc_corrected,ecc_uncorrected
        out_has "^1,3,1$" "ECC counters in the device table"
        out_has "^0,0,0$" "ECC counters of the other device untouched"
        expect_exit 0 "health after ECC errors" --csv --fields id,health,faults health
        out_has "^1,ok,$" "ECC errors are not faults in force"
        expect_exit 0 "fault clear keeps ECC counters" fault clear 1
        expect_exit 0 "device show after ECC errors" device show 1
        out_has "HBM ECC:      3 corrected, 1 uncorrected" "device show has the ECC counters"
        expect_exit 1 "ecc-corrected of a fraction" fault inject 1 ecc-corrected 0.5
        err_has "whole number of errors" "ECC count error names what it must be"
        expect_exit 2 "fault inject of an unknown kind" fault inject 0 melt
        expect_exit 1 "fault inject on an unknown device" fault inject 4 slow 2
        err_has "device 4" "fault inject names the device"

        # session kill: a raw connection counts as a session without hello
        python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('up', flush=True); sys.exit(0 if s.recv(1) == b'' else 1)" "$sock" >"$dir/py.out" 2>&1 &
        py_pid=$!; pids="$pids $py_pid"
        until_ok 5 grep -q up "$dir/py.out"
        sleep 0.2
        "$npuctl" --socket "$sock" --json sessions >"$dir/out"
        sid=$(python3 -c "import json,sys
l=json.load(open(sys.argv[1])); m=[s for s in l if s['pid']==int(sys.argv[2])] or [s for s in l if s['comm'].startswith('python')]
print(m[0]['id'] if m else '')" "$dir/out" "$py_pid")
        if [ -n "$sid" ]; then
                expect_exit 0 "session kill" session kill "$sid"
                until_ok 5 sh -c "! kill -0 $py_pid 2>/dev/null" && wait $py_pid && pass "killed client saw its connection end" \
                        || fail "killed client still connected"
                expect_exit 0 "sessions after kill" --json sessions
                py "killed session gone" "assert all(s['id'] != $sid for s in j)"
        else
                fail "raw connection not listed as a session: $(cat "$dir/out")"
        fi
        # a libnpu client is told why: the error of its next call names the kill
        "$hold" "$sock" 0 4096 3 >"$dir/hold3.out" 2>&1 &
        h3=$!; pids="$pids $h3"
        until_ok 5 grep -q ready "$dir/hold3.out"
        "$npuctl" --socket "$sock" --json sessions >"$dir/out"
        sid=$(python3 -c "import json,sys
print([s['id'] for s in json.load(open(sys.argv[1])) if s['pid']==int(sys.argv[2])][0])" "$dir/out" "$h3")
        expect_exit 0 "session kill of a libnpu client" session kill "$sid"
        wait $h3; r=$?
        [ $r = 3 ] && grep -q "connection to npud lost: killed by administrator (uid 0 via socket)" "$dir/hold3.out" \
                && pass "killed client's error carries the reason" || fail "killed client: exit $r: $(cat "$dir/hold3.out")"
        expect_exit 1 "session kill of an unknown session" session kill 999999
        err_has 999999 "unknown session named"
        expect_exit 2 "session kill of a non-number" session kill abc

        # reload: a good file, then a broken one (the old configuration stays)
        cat >"$conf" <<'EOF'
{"tenants": [{"name": "lc", "class": "latency-critical", "uids": [0]},
             {"name": "batch", "class": "best-effort", "weight": 2, "uids": [65534]},
             {"name": "extra", "class": "normal"}]}
EOF
        expect_exit 0 "quota set before reload" quota set lc 3G
        expect_exit 0 "reload" reload
        out_has "tenant 'lc' keeps its total quota set with 'npuctl quota set'" "reload names the run-time quotas it keeps"
        expect_exit 0 "tenants after reload" --json tenants
        py "reload added a tenant" "assert [t['name'] for t in j['tenants']] == ['default', 'lc', 'batch', 'extra']"
        py "run-time quota survives a reload that leaves the file's quota alone" "t={x['name']:x for x in j['tenants']}; assert t['lc']['memory_quota_total']==3<<30 and t['lc']['runtime_quotas']['total']==3<<30, t['lc']"
        # the file now sets lc's total quota: the file wins for that quota only
        cat >"$conf" <<'EOF'
{"tenants": [{"name": "lc", "class": "latency-critical", "uids": [0], "memory_quota": {"total": 1073741824}},
             {"name": "batch", "class": "best-effort", "weight": 2, "uids": [65534]},
             {"name": "extra", "class": "normal"}]}
EOF
        expect_exit 0 "reload --json with a changed quota" --json reload
        py "reload JSON: the changed quota is the file's, the others stay" "assert j['runtime_quotas_dropped']==[{'tenant': 'lc', 'quota': 'total'}] and j['runtime_quotas_kept']==[{'tenant': 'lc', 'quota': 'device 1'}], j"
        expect_exit 0 "tenants after the quota changed in the file" --json tenants
        py "file's new total wins" "t={x['name']:x for x in j['tenants']}; assert t['lc']['memory_quota_total']==1<<30 and 'total' not in t['lc']['runtime_quotas'], t['lc']"
        # a tenant removed by a reload: its work stays in sched and device show
        cat >"$conf" <<'EOF'
{"tenants": [{"name": "batch", "class": "best-effort", "weight": 2, "uids": [65534]},
             {"name": "extra", "class": "normal"}]}
EOF
        expect_exit 0 "reload removing lc" reload
        expect_exit 0 "sched --json after lc was removed" --json sched
        py "removed tenant's work stays in sched" "lc=[t for t in j[0]['tenants'] if t['name']=='lc']; assert lc and lc[0]['removed'] is True and lc[0]['tasks'] > 0, j[0]"
        expect_exit 0 "sched table after lc was removed" sched
        out_has "lc (removed)" "sched table marks the removed tenant"
        expect_exit 0 "device show after lc was removed" device show 0
        out_has "lc (removed)" "device show keeps the removed tenant's work"
        cat >"$conf" <<'EOF'
{"tenants": [{"name": "lc", "class": "latency-critical", "uids": [0]},
             {"name": "batch", "class": "best-effort", "weight": 2, "uids": [65534]},
             {"name": "extra", "class": "normal"}]}
EOF
        expect_exit 0 "reload naming lc again" reload
        expect_exit 0 "sched --json after lc came back" --json sched
        py "a tenant named again takes its statistics back" "lc=[t for t in j[0]['tenants'] if t['name']=='lc']; assert len(lc)==1 and lc[0]['removed'] is False and lc[0]['tasks'] > 0, j[0]"
        cat >"$conf" <<'EOF'
{"tenants": [{"name": "lc", "clas": "latency-critical"}]}
EOF
        expect_exit 1 "reload of a broken file" reload
        err_has "tenants\[0\].clas" "reload error names the key"
        expect_exit 0 "tenants after failed reload" --json tenants
        py "old configuration stays" "assert [t['name'] for t in j['tenants']] == ['default', 'lc', 'batch', 'extra']"

        # unprivileged callers may look but not act (exit 4)
        if command -v setpriv >/dev/null; then
                chmod 0666 "$sock"; chmod o+rx "$dir"
                nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$npuctl" --socket "$sock" "$@" >"$dir/out" 2>"$dir/err"; }
                nobody drain 0; r=$?
                [ $r = 4 ] && pass "unprivileged drain: exit 4" || fail "unprivileged drain: exit $r $(cat "$dir/err")"
                grep -q "admin group" "$dir/err" && pass "permission message" || fail "permission message: $(cat "$dir/err")"
                nobody reload; r=$?; [ $r = 4 ] && pass "unprivileged reload: exit 4" || fail "unprivileged reload: exit $r"
                nobody fault inject 0 slow 2; r=$?; [ $r = 4 ] && pass "unprivileged fault: exit 4" || fail "unprivileged fault: exit $r"
                nobody quota set batch 1G; r=$?; [ $r = 4 ] && pass "unprivileged quota set: exit 4" || fail "unprivileged quota set: exit $r"
                nobody --json mem; r=$?
                [ $r = 0 ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['all'] is False and all(not d['sessions'] for d in j['devices'])" "$dir/out" \
                        && pass "unprivileged mem hides other users' sessions" || fail "unprivileged mem: exit $r $(cat "$dir/out")"
                nobody health; r=$?; [ $r = 0 ] && pass "unprivileged health" || fail "unprivileged health: exit $r"
                # diag joins the best-effort tenant npud lets the user into
                nobody --json diag; r=$?
                [ $r = 0 ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['tenant'] == 'batch' and j['passed'], j" "$dir/out" \
                        && pass "diag as nobody runs in the best-effort tenant" || fail "diag as nobody: exit $r $(cat "$dir/err" "$dir/out" | head -5)"
        else
                fail "setpriv is missing (util-linux)"
        fi
else
        # not root (nor, presumably, in the admin group): every action is refused
        expect_exit 4 "drain without rights" drain 0
        expect_exit 4 "reload without rights" reload
fi

# top and --watch
expect_exit 0 "top --count 2" top --count 2 --watch 0.2
[ "$(grep -c '^npuctl top' "$dir/out")" = 2 ] && pass "top refreshed twice" || fail "top output: $(head -5 "$dir/out")"
out_has "TASKS/S" "top shows task rates"
out_has "latency-critical" "top shows tenants"
expect_exit 0 "top --json --count 2" --json top --count 2 --watch 0.1
python3 -c "import json,sys
l=[json.loads(x) for x in open(sys.argv[1])]; assert len(l)==2 and len(l[1]['devices'])==2 and 'sched' in l[0]" "$dir/out" \
        && pass "top --json: one object per refresh" || fail "top --json: $(head -c 300 "$dir/out")"
expect_exit 2 "top --csv" top --csv --count 1
out_has_not() { grep -q -- "$1" "$dir/out" && { fail "$2: '$1' in output"; head -8 "$dir/out"; } || pass "$2"; }
expect_exit 0 "top with telemetry and history" top --count 1
out_has "CUBE% 1M *TEMP *POWER" "top: one-minute cube average, temperature and power columns"
out_has "^0 .* [0-9]* C *[0-9]* W " "top: temperature and power figures"
out_has_not "n/a" "top: nothing unavailable from a full npud"
# An npud without telemetry ("telemetry": false): no sensor figures, no history method. top
# still works from the plain status polls: n/a in the sensor columns, the one-minute average
# over its own polls (~), task rates from deltas between polls, and a line naming the columns.
sock_nt=$dir/nt.sock
printf '{"telemetry": false}\n' >"$dir/nt.conf"
"$npud" --socket "$sock_nt" --config "$dir/nt.conf" --sim-devices 2 --log-level warn 2>"$dir/nt.log" &
nt_pid=$!
i=0; while ! "$npuctl" --socket "$sock_nt" version >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
"$npuctl" --socket "$sock_nt" diag >/dev/null 2>&1 &
diag_pid=$!
"$npuctl" --socket "$sock_nt" top --count 3 --watch 0.3 >"$dir/out" 2>"$dir/err"
r=$?; wait $diag_pid
[ $r = 0 ] && [ "$(grep -c '^npuctl top' "$dir/out")" = 3 ] && pass "top without telemetry: exit 0, 3 refreshes" \
        || fail "top without telemetry: exit $r $(cat "$dir/err")"
out_has "^0 .* ~[0-9.]* *n/a *n/a " "top without telemetry: n/a for TEMP and POWER, ~average from its own polls"
out_has "^TEMP, POWER: n/a (npud reports no telemetry); CUBE% 1M: ~ averages top's own polls (npud keeps no history)" \
        "top without telemetry names the unavailable columns"
[ "$(grep -c '^TEMP, POWER: n/a' "$dir/out")" = 3 ] && pass "... on every refresh" || fail "note count: $(grep -c '^TEMP, POWER' "$dir/out")"
python3 - "$dir/out" >"$dir/pyerr" 2>&1 <<'PY' && pass "top without telemetry: task rates are numbers after the first refresh" || { fail "top rates:"; cat "$dir/pyerr"; }
import re, sys
frames = open(sys.argv[1]).read().split("npuctl top - ")[1:]
for n, f in enumerate(frames):
    rows = [l.split() for l in f.splitlines() if re.match(r"^[01] +910B3", l)]
    assert len(rows) == 2, f
    for r in rows:
        rate = r[-2]
        assert (rate == "-") if n == 0 else rate.isdigit(), (n, r)
PY
"$npuctl" --socket "$sock_nt" --json top --count 2 --watch 0.1 >"$dir/out" 2>"$dir/err"
python3 -c "import json,sys
l=[json.loads(x) for x in open(sys.argv[1])]
assert len(l) == 2 and all(o['unavailable'] == ['temperature', 'power', 'history'] and 'history' not in o for o in l), l[0].get('unavailable')
assert 'temperature' not in l[0]['devices'][0] and 'uuid' in l[0]['devices'][0]" "$dir/out" 2>"$dir/pyerr" \
        && pass "top --json without telemetry lists what is unavailable" || { fail "top --json without telemetry:"; cat "$dir/pyerr"; }
"$npuctl" --socket "$sock_nt" --json top --count 1 >"$dir/out" 2>/dev/null
"$npuctl" --socket "$sock" --json top --count 1 >"$dir/out" 2>"$dir/err"
python3 -c "import json,sys
o=json.loads(open(sys.argv[1]).readline())
assert o['unavailable'] == [] and len(o['history']) == 2 and 'cube' in o['history'][0], o.get('unavailable')" "$dir/out" 2>"$dir/pyerr" \
        && pass "top --json with telemetry: history included, nothing unavailable" || { fail "top --json with telemetry:"; cat "$dir/pyerr"; }
"$npuctl" --socket "$sock_nt" devices >"$dir/out" 2>&1
out_has "| 0   | 910B3 | ok .* n/a .* n/a |" "devices without telemetry: n/a, not zeros"
"$npuctl" --socket "$sock_nt" devices --csv --fields id,temperature,power >"$dir/out" 2>&1
out_has "^0,,$" "devices --csv without telemetry: empty cells"
"$npuctl" --socket "$sock_nt" devices --history 5 >"$dir/out" 2>"$dir/err"
[ $? != 0 ] && grep -q 'npud keeps no history (npud.conf "telemetry": false)' "$dir/err" \
        && pass "devices --history without telemetry: a clear error" || fail "history without telemetry: $(cat "$dir/err")"
kill $nt_pid; wait $nt_pid 2>/dev/null
expect_exit 0 "devices --watch --count 3" --watch 0.1 --count 3 devices
[ "$(grep -c '^Every 0.1s: npuctl devices' "$dir/out")" = 3 ] && pass "--watch repeats the command" || fail "--watch output: $(head -5 "$dir/out")"
expect_exit 0 "mem --watch with --csv" mem --csv --watch 0.1 --count 2
[ "$(grep -c '^timestamp,device,' "$dir/out")" = 1 ] && [ "$(grep -c 'Z,1,' "$dir/out")" = 2 ] && [ "$(wc -l <"$dir/out")" = 5 ] \
        && pass "--watch --csv is a log: one header, a timestamp column, each run's rows" || fail "--watch --csv: $(cat "$dir/out")"

# ---- telemetry: identity, temperature, power, clock, ECC; topology; history; diagnostics ----
expect_exit 0 "devices --json telemetry" --json devices
py "devices have identity and telemetry" "
import re
for d in j:
        assert re.fullmatch(r'[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}', d['uuid']), d['uuid']
        assert re.fullmatch(r'0000:[0-9a-f]{2}:00\\.0', d['bus_id']) and d['serial'] and d['firmware'] and d['driver']
        assert 30 <= d['temperature'] <= 80 and 80 <= d['power'] <= d['power_limit'] == 350, d
        assert d['clock_mhz'] == 1800 and set(d['ecc']) == {'corrected', 'uncorrected'}
assert j[0]['uuid'] != j[1]['uuid'] and j[0]['bus_id'] != j[1]['bus_id']"
expect_exit 0 "devices table has temperature and power" devices
out_has "Temp(C)" "devices table temperature column"
out_has "Power(W)" "devices table power column"
expect_exit 0 "devices --csv raw telemetry" devices --csv --fields id,temperature,power,clock_mhz,uuid,bus_id
pyraw "CSV telemetry is raw numbers" "
import csv
rows=list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2
for r in rows: float(r['temperature']); float(r['power']); assert r['clock_mhz'] == '1800' and len(r['uuid']) == 36"
expect_exit 0 "device show telemetry" device show 0
out_has "Temperature:  " "device show temperature"
out_has "Power:        .* W of 350 W" "device show power and limit"
out_has "AI core:      1800 MHz" "device show clock"
out_has "Bus-Id:       0000:" "device show bus id"
expect_exit 0 "topo" topo
out_has "^NPU0 *X *HCCS" "topo matrix: 910B3 devices linked by HCCS"
out_has "HCCS = " "topo legend"
expect_exit 0 "topo --json" --json topo
py "topo JSON matrix" "assert j['links'] == [['X', 'HCCS'], ['HCCS', 'X']] and [d['hccs_group'] for d in j['devices']] == [0, 0] and j['devices'][0]['pcie_switch'] == 0"
expect_exit 2 "topo --csv" topo --csv
expect_exit 0 "diag" diag
out_has "cube:MatMul *pass" "diag: known answer on the cube cores"
out_has "vector:Add *pass" "diag: known answer on the vector cores"
out_has "aicpu:Cast *pass" "diag: known answer on the AI CPUs"
out_has "memory:pattern *pass" "diag: memory pattern"
out_has "bandwidth:d2d *pass *[0-9.]* GB/s" "diag: copy bandwidth with its figure"
out_has "^PASS: 0 failures" "diag verdict"
expect_exit 0 "diag -r 2 --csv" diag -r 2 --csv --fields id,test,result,value
pyraw "diag CSV: every test of both devices passes, bandwidths as numbers" "
import csv
rows=list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 16 and all(r['result'] == 'pass' for r in rows), rows
assert all(float(r['value']) > 0 for r in rows if r['test'].startswith('bandwidth'))"
expect_exit 2 "diag -r 4" diag -r 4
err_has "1|2|3" "diag names the levels"
# power follows the load: the diagnostics' copies show in the per-second history
sleep 1.2
expect_exit 0 "devices --history --json" --json devices --history 30
py "history: samples per second with utilization, temperature and power" "
d=j['devices'][0]; n=len(d['time_ms'])
assert j['period_ms'] == 1000 and 2 <= n <= 30 and all(len(d[k]) == n for k in ('cube','vector','aicpu','dma','temperature','power'))
assert max(d['power']) > 90 and max(d['dma']) > 0, (d['power'], d['dma'])"
expect_exit 0 "devices --history table" devices --history 5
out_has "TEMP(C)" "history table"
expect_exit 0 "devices --history --csv" devices --history 3 --csv --fields time,id,cube,power
pyraw "history CSV raw" "
import csv
rows=list(csv.DictReader(open(sys.argv[1])))
assert 2 <= len(rows) <= 6 and all(0 <= float(r['cube']) <= 1 and float(r['time']) > 1e9 for r in rows), rows"
expect_exit 2 "devices --history 301" devices --history 301

expect_exit 0 "version" version
out_has "npud 0.1.0" "version names npud"

kill $hold_pid 2>/dev/null
kill -TERM $npud_pid
wait $npud_pid && pass "npud exits 0" || { fail "npud exit status"; tail "$dir/npud.log"; }

# installed: man pages and completion. -o all: install what is built; a rebuild here would
# lack the sanitizer flags of check-asan.
if make -s -o all install BUILD="$build" PREFIX=/usr DESTDIR="$dir/root" >"$dir/install.log" 2>&1; then
        for f in share/man/man8/npud.8 share/man/man8/npuctl.8 share/man/man5/npud.conf.5 \
                 share/man/man3/libnpu.3 share/bash-completion/completions/npuctl \
                 include/npu.h include/npu-admin.h; do
                [ -f "$dir/root/usr/$f" ] && pass "installed $f" || fail "not installed: $f"
        done
else
        fail "make install"; tail "$dir/install.log"
fi

[ $fails = 0 ] && echo "npuctl: all checks passed" || echo "npuctl: $fails check(s) failed"
[ $fails = 0 ]
