#!/bin/sh
# Containers and clusters against a real npud with two simulated devices:
#   CDI: npuctl cdi generate writes a spec that tests/cdi/validate.py accepts against the CDI
#   schema subset in tests/cdi/cdi-schema.json (and the validator rejects broken specs);
#   no two devices' edits set the same variable, so a container may be given several; a
#   "container" run with the environment a CDI runtime builds from the spec for npu=0 and
#   npu=2 (of 3) uses devices 0 and 2 and not 1, for npu=1 only device 1, for all every one;
#   npuctl cdi tenants gives per-device tenants, and NPU_TENANT=npu-dev1 limits to device 1.
#   Slurm: npuctl slurm gres; contrib/slurm/npud-prolog in a fake job environment makes the
#   job's tenant (its uid, its GRES devices, its quota) that the job's user lands in, the
#   epilog removes it; npuctl tenant add/remove errors name what was wrong, a non-admin gets
#   exit 4, a reload keeps run-time tenants.
set -u
build=${1:-build}
npud=$build/bin/npud
npuctl=$build/bin/npuctl
hold=$build/tests/npuctl-hold
dir=$(mktemp -d /tmp/npud-cluster-XXXXXX)
sock=$dir/npud.sock
conf=$dir/npud.conf
fails=0
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
expect_exit() {
        want=$1; what=$2; shift 2
        "$npuctl" --socket "$sock" "$@" >"$dir/out" 2>"$dir/err"
        got=$?
        if [ "$got" = "$want" ]; then pass "$what"; else
                fail "$what: exit $got, expected $want"; sed 's/^/    /' "$dir/err" "$dir/out" | head -20; fi
}
out_has() { grep -q -- "$1" "$dir/out" && pass "$2" || { fail "$2: no '$1' in output"; sed 's/^/    /' "$dir/out" | head -20; }; }
err_has() { grep -q -- "$1" "$dir/err" && pass "$2" || { fail "$2: no '$1' in: $(cat "$dir/err")"; }; }
py() {
        what=$1; code=$2
        if python3 -c "import json,sys
j=json.load(open(sys.argv[1]))
$code" "$dir/out" 2>"$dir/pyerr"; then pass "$what"; else
                fail "$what"; sed 's/^/    /' "$dir/pyerr" | tail -3; sed 's/^/    /' "$dir/out" | head -20; fi
}
until_ok() {
        t=$(( $1 * 20 )); shift
        while [ $t -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; t=$((t - 1)); done
        return 1
}

for f in "$npud" "$npuctl" "$hold"; do
        [ -x "$f" ] || { echo "FAIL: $f is missing (make all first)"; exit 1; }
done
[ -x /usr/bin/python3 ] || { echo "FAIL: /usr/bin/python3 is missing"; exit 1; }
validate="/usr/bin/python3 tests/cdi/validate.py tests/cdi/cdi-schema.json"
me=$(id -u)

echo '{"tenants": [{"name": "batch", "class": "best-effort", "uids": [65533]}]}' >"$conf"
"$npud" --socket "$sock" --config "$conf" --sim-devices 2 --log-level warn 2>"$dir/npud.log" &
pids="$pids $!"
until_ok 10 "$npuctl" --socket "$sock" version || { echo "FAIL: npud did not start"; cat "$dir/npud.log"; exit 1; }

# ---- CDI ----
expect_exit 0 "cdi generate -o FILE" cdi generate -o "$dir/npud.yaml"
$validate "$dir/npud.yaml" >"$dir/val" 2>&1 && pass "the spec is valid CDI" || { fail "spec invalid:"; cat "$dir/val"; }
cp "$dir/npud.yaml" "$dir/out"
py "spec: kind, version, devices 0, 1 and all, socket mount, NPU_SOCKET, NPU_VISIBLE_DEVICE_N" "
assert j['cdiVersion'] == '0.6.0' and j['kind'] == 'npud.io/npu', j
assert [d['name'] for d in j['devices']] == ['0', '1', 'all'], j['devices']
m = j['containerEdits']['mounts']
assert m == [{'hostPath': '$sock', 'containerPath': '/run/npud/npud.sock', 'options': ['bind', 'rw']}], m
assert 'NPU_SOCKET=/run/npud/npud.sock' in j['containerEdits']['env']
assert j['devices'][0]['containerEdits']['env'] == ['NPU_VISIBLE_DEVICE_0=0']
assert j['devices'][1]['containerEdits']['env'] == ['NPU_VISIBLE_DEVICE_1=1']
assert j['devices'][2]['containerEdits']['env'] == ['NPU_VISIBLE_DEVICE_ALL=1']
# a container may be given any set of the devices: no two devices' edits may set one variable
# (CDI merges them, and the last one would win) or mount one container path twice
seen = {}
for d in j['devices']:
    e = d['containerEdits']
    for v in e.get('env', []):
        k = v.split('=', 1)[0]
        assert k not in seen and k not in [g.split('=', 1)[0] for g in j['containerEdits']['env']], (k, d['name'], seen.get(k))
        seen[k] = d['name']
    assert not e.get('mounts') and not e.get('deviceNodes'), d"
expect_exit 0 "cdi generate -o - (stdout)" cdi generate -o -
cmp -s "$dir/out" "$dir/npud.yaml" && pass "stdout and file agree" || fail "cdi generate -o - differs from the file"
expect_exit 2 "cdi generate with a stray argument" cdi generate extra
err_has "unexpected argument 'extra'" "the stray argument is named"
expect_exit 1 "cdi generate into a missing directory" cdi generate -o "$dir/no/such/npud.yaml"
err_has "cannot write" "the unwritable file is named"
# the validator is not a rubber stamp
python3 -c "import json,sys
j=json.load(open(sys.argv[1])); del j['kind']; j['devices'][0]['name']='-bad'
j['containerEdits']['mounts'][0]['hostPath']=5; json.dump(j, open(sys.argv[2], 'w'))" "$dir/npud.yaml" "$dir/bad.json"
$validate "$dir/bad.json" >"$dir/val" 2>&1 && fail "validator accepted a broken spec" || {
        grep -q "required key 'kind'" "$dir/val" && grep -q "devices\[0\].name" "$dir/val" &&
        grep -q "hostPath: expected string" "$dir/val" && pass "validator rejects a broken spec, naming each fault" ||
        { fail "validator messages:"; cat "$dir/val"; }; }

# the per-device tenants, installed by a reload
expect_exit 0 "cdi tenants --uid" cdi tenants --uid "$me"
py "cdi tenants: one tenant per device" "
assert j['tenants'] == [{'name': 'npu-dev0', 'devices': [0], 'uids': [$me]}, {'name': 'npu-dev1', 'devices': [1], 'uids': [$me]}], j"
python3 -c "import json,sys
t=json.load(open(sys.argv[1]))['tenants']
json.dump({'tenants': [{'name': 'batch', 'class': 'best-effort', 'uids': [65533]}] + t}, open(sys.argv[2], 'w'))" "$dir/out" "$conf"
expect_exit 0 "cdi tenants --gid defaults to the socket's group" cdi tenants
py "default gids" "assert j['tenants'][0]['gids'] == [$(stat -c %g "$sock")], j"
expect_exit 0 "reload with the per-device tenants" reload

# "podman run --device npud.io/npu=A --device npud.io/npu=B ...": the environment a CDI runtime
# builds from the spec (the spec's edits, then each device's, in order; the mount is the host
# path here). cdienv SPEC NAME...: that environment as VAR=VALUE words for env(1).
cdienv() {
        python3 -c "import json,sys
j=json.load(open(sys.argv[1])); env={}
devs={d['name']: d for d in j['devices']}
for e in [j['containerEdits']] + [devs[n]['containerEdits'] for n in sys.argv[2:]]:
    for v in e.get('env', []):
        k, val = v.split('=', 1); env[k] = val
env.pop('NPU_SOCKET')
print(' '.join('%s=%s' % kv for kv in sorted(env.items())))" "$@"
}
cdi_run() { # cdi_run SPEC SOCKET "NAMES" DEVICE: npuctl-hold allocating on DEVICE in such a container
        env -u NPU_TENANT NPU_SOCKET="$2" $(cdienv "$1" $3) "$hold" "$2" "$4" 4096 0 >"$dir/out" 2>"$dir/err"
}
# Three devices, so that the one left out of a pair is seen refused.
sock3=$dir/npud3.sock
"$npud" --socket "$sock3" --sim-devices 3 --log-level warn 2>"$dir/npud3.log" &
pid3=$!; pids_before3=$pids; pids="$pids $pid3"
until_ok 10 "$npuctl" --socket "$sock3" version || fail "npud with 3 devices did not start"
"$npuctl" --socket "$sock3" cdi generate -o "$dir/npud3.yaml" 2>/dev/null || fail "cdi generate (3 devices)"
$validate "$dir/npud3.yaml" >"$dir/val" 2>&1 || { fail "3-device spec invalid:"; cat "$dir/val"; }
[ "$(cdienv "$dir/npud3.yaml" 0 2)" = "NPU_VISIBLE_DEVICE_0=0 NPU_VISIBLE_DEVICE_2=2" ] \
        && pass "devices 0 and 2 together: both variables survive the merge" || fail "merged env: $(cdienv "$dir/npud3.yaml" 0 2)"
cdi_run "$dir/npud3.yaml" "$sock3" "0 2" 0 && cdi_run "$dir/npud3.yaml" "$sock3" "0 2" 2 \
        && pass "container given npu=0 and npu=2 allocates on device 0 and on device 2" \
        || fail "two devices: $(cat "$dir/err")"
cdi_run "$dir/npud3.yaml" "$sock3" "0 2" 1 && fail "container given npu=0 and npu=2 allocated on device 1" \
        || err_has "asked for devices 0,2 only" "... and device 1 is refused, naming the session's devices"
cdi_run "$dir/npud3.yaml" "$sock3" "1" 0 && fail "container given npu=1 allocated on device 0" \
        || err_has "asked for device 1 only (hello 'devices', \$NPU_VISIBLE_DEVICES), not device 0" "one device: the others refused"
cdi_run "$dir/npud3.yaml" "$sock3" "all" 2 && cdi_run "$dir/npud3.yaml" "$sock3" "1 all" 0 \
        && pass "all, alone or beside a single device, gives every device" || fail "all: $(cat "$dir/err")"
env NPU_VISIBLE_DEVICES=1,2 "$hold" "$sock3" 2 4096 0 >"$dir/out" 2>"$dir/err" \
        && pass "NPU_VISIBLE_DEVICES=1,2 by hand" || fail "NPU_VISIBLE_DEVICES: $(cat "$dir/err")"
env NPU_VISIBLE_DEVICES=1,x "$hold" "$sock3" 1 4096 0 >"$dir/out" 2>"$dir/err" && fail "NPU_VISIBLE_DEVICES=1,x accepted" \
        || err_has "NPU_VISIBLE_DEVICES='1,x': expected device ids" "a malformed NPU_VISIBLE_DEVICES is named"
env NPU_VISIBLE_DEVICE_7=7 "$hold" "$sock3" 0 4096 0 >"$dir/out" 2>"$dir/err" && fail "a device npud lacks accepted" \
        || err_has "'devices'\[0\] is not a device id (npud has 3 devices)" "a device npud lacks is refused at hello"
kill $pid3; wait $pid3 2>/dev/null; pids=$pids_before3

# -e NPU_TENANT=npu-dev1: a container accounted and limited by its own tenant
ctr() { env NPU_SOCKET="$sock" NPU_TENANT=npu-dev1 "$@"; }
ctr "$hold" "$sock" 1 4096 0 >"$dir/out" 2>"$dir/err" && pass "container for device 1 allocates on device 1" \
        || fail "device 1 from the container: $(cat "$dir/err")"
ctr "$hold" "$sock" 0 4096 0 >"$dir/out" 2>"$dir/err" && fail "container for device 1 allocated on device 0" \
        || err_has "tenant 'npu-dev1' may not use device 0" "device 0 refused, naming tenant and device"
env NPU_TENANT=npu-dev7 "$hold" "$sock" 0 4096 0 >"$dir/out" 2>"$dir/err" && fail "unknown NPU_TENANT accepted" \
        || err_has "no tenant named 'npu-dev7'" "an unknown NPU_TENANT is named"
env NPU_TENANT= "$hold" "$sock" 0 4096 0 >"$dir/out" 2>"$dir/err" && pass "empty NPU_TENANT: the credentials' tenant" \
        || fail "empty NPU_TENANT: $(cat "$dir/err")"

# ---- Slurm ----
expect_exit 0 "slurm gres" slurm gres
out_has "^AutoDetect=off" "gres.conf turns autodetection off"
[ "$(grep -c '^Name=gpu Type=npu File=/dev/davinci[01]$' "$dir/out")" = 2 ] && pass "one gres line per device" \
        || { fail "gres lines:"; cat "$dir/out"; }
expect_exit 2 "slurm gres --name with a bad name" slurm gres --name 'a b'

prolog=contrib/slurm/npud-prolog
epilog=contrib/slurm/npud-epilog
job() { # job VAR=VALUE... SCRIPT: a Slurm job's environment, nothing of ours
        env -i PATH="$(cd "$(dirname "$npuctl")" && pwd):/usr/bin:/bin" NPU_SOCKET="$sock" \
                NPUD_SLURM_DEFAULTS=/nonexistent SLURM_JOB_ID=42 SLURM_JOB_UID=65534 "$@" >"$dir/out" 2>"$dir/err"
}
job SLURM_JOB_GPUS=1 NPUD_SLURM_QUOTA=1M "$prolog" && pass "prolog" || fail "prolog: $(cat "$dir/err")"
expect_exit 0 "tenants after the prolog" --json tenants
py "job tenant: devices [1], quota 1 MiB" "
t = {x['name']: x for x in j['tenants']}['slurm-42']
assert t['devices'] == [1] and t['memory_quota_total'] == 1 << 20, t"
if [ "$me" != 0 ]; then
        echo "skip: the job user's view needs root (setpriv to uid 65534)"
elif command -v setpriv >/dev/null; then
        chmod 0666 "$sock"; chmod o+rx "$dir"
        asjob() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@" >"$dir/out" 2>"$dir/err"; }
        asjob "$hold" "$sock" 1 65536 0 && pass "the job's user allocates on its device" \
                || fail "job user on device 1: $(cat "$dir/err")"
        asjob "$hold" "$sock" 1 2097152 0 && fail "job user went over its quota" \
                || err_has "tenant 'slurm-42' would exceed its memory quota" "the job's quota holds"
        asjob "$hold" "$sock" 0 4096 0 && fail "job user allocated on a device not its own" \
                || err_has "tenant 'slurm-42' may not use device 0" "the job's devices hold"
        asjob "$npuctl" --socket "$sock" tenant add x --uid 1
        [ $? = 4 ] && pass "tenant add by a non-admin: exit 4" || fail "non-admin tenant add: $(cat "$dir/err")"
        asjob "$npuctl" --socket "$sock" tenant remove slurm-42
        [ $? = 4 ] && pass "tenant remove by a non-admin: exit 4" || fail "non-admin tenant remove"
else
        fail "setpriv is missing (util-linux)"
fi
expect_exit 0 "reload with a run-time tenant" reload
expect_exit 0 "tenants" --json tenants
py "the reload kept the job's tenant" "assert 'slurm-42' in [x['name'] for x in j['tenants']], j"
job "$epilog" && pass "epilog" || fail "epilog: $(cat "$dir/err")"
expect_exit 0 "tenants after the epilog" --json tenants
py "the job's tenant is gone" "assert 'slurm-42' not in [x['name'] for x in j['tenants']], j"
job "$epilog" && pass "epilog twice is fine" || fail "second epilog: $(cat "$dir/err")"
job "$prolog" && pass "prolog of a job without NPUs" || fail "prolog without NPUs: $(cat "$dir/err")"
expect_exit 0 "tenants" --json tenants
py "a job without NPUs gets no tenant" "assert 'slurm-42' not in [x['name'] for x in j['tenants']]"
job SLURM_JOB_GPUS='0;rm' "$prolog" && fail "prolog accepted a bad device list" \
        || err_has "is not N,N" "a bad device list is named"
job SLURM_JOB_GPUS=0 NPUD_SLURM_DEVICES=1 SLURM_JOB_ID=43 "$prolog" || fail "prolog with NPUD_SLURM_DEVICES"
expect_exit 0 "tenants" --json tenants
py "NPUD_SLURM_DEVICES wins" "assert {x['name']: x for x in j['tenants']}['slurm-43']['devices'] == [1]"

# ---- tenant add/remove errors ----
expect_exit 1 "tenant add of an existing name" tenant add slurm-43
err_has "a tenant named 'slurm-43' exists already" "duplicate named"
expect_exit 1 "tenant add with a device npud lacks" tenant add t1 --devices 5
err_has "devices 0 to 1" "the devices there are are named"
expect_exit 1 "tenant add with a bad class" tenant add t1 --class urgent
err_has "class" "the bad key is named"
expect_exit 2 "tenant add with a bad uid" tenant add t1 --uid x
expect_exit 2 "tenant add without a name" tenant add --uid 1
expect_exit 1 "tenant remove of a file tenant" tenant remove batch
err_has "in the configuration file" "file tenants stay the file's"
expect_exit 1 "tenant remove of no tenant" tenant remove nosuch
err_has "no tenant named 'nosuch'" "unknown tenant named"
expect_exit 0 "tenant remove" tenant remove slurm-43

kill -0 $(echo $pids) 2>/dev/null && pass "npud still running" || fail "npud died: $(tail "$dir/npud.log")"
[ $fails = 0 ] && echo "test-cluster: all passed" || echo "test-cluster: $fails failed"
[ $fails = 0 ]
