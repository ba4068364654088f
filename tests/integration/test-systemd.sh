#!/bin/sh
# npud under systemd, checked without a running systemd:
#   1. systemd-analyze verify prints nothing for the installed npud.service and npud.socket
#   2. systemd-analyze security: overall exposure of npud.service at most 3.0
#   3. systemd-sysusers and systemd-tmpfiles accept the shipped files (in a temporary root)
#   4. socket activation (systemd-socket-activate): npud serves the passed socket and leaves
#      the socket file alone
#   5. sd_notify: READY=1 with STATUS=, STATUS= following sessions (at most once a second),
#      WATCHDOG=1, RELOADING=1 + MONOTONIC_USEC= then READY=1 on SIGHUP, STOPPING=1 on SIGTERM
#   6. logging: plain lines when $JOURNAL_STREAM is not stderr; structured journal fields when
#      it is (against a fake journald in a private mount namespace, where one can be made)
#   7. --check-config: the example configuration passes, a bad one exits 2 naming the key
# Usage: test-systemd.sh [BUILD-DIR]
set -u
build=${1:-build}
npud=$(cd "$build/bin" && pwd)/npud
npuctl=$(cd "$build/bin" && pwd)/npuctl
dir=$(mktemp -d /tmp/npud-systemd-XXXXXX)
fails=0
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# wait_for FILE PATTERN [TENTHS]: until grep -E finds PATTERN in FILE (default 5 s).
wait_for() {
        i=0
        while ! grep -Eq "$2" "$1" 2>/dev/null; do
                [ $i -ge "${3:-50}" ] && return 1
                sleep 0.1
                i=$((i + 1))
        done
}

# wait_until TENTHS COMMAND...: until COMMAND succeeds.
wait_until() {
        n=$1; shift; i=0
        while ! "$@"; do
                [ $i -ge "$n" ] && return 1
                sleep 0.1
                i=$((i + 1))
        done
}

for tool in systemd-analyze systemd-socket-activate systemd-sysusers systemd-tmpfiles python3; do
        command -v $tool >/dev/null || { fail "$tool is missing (make deps installs systemd)"; }
done
[ $fails = 0 ] || exit 1

# --- 1-3: the unit files, installed into a temporary root -----------------------------------
root=$dir/root
# -o all: install what was built, never rebuild here (the build is the caller's).
if make -s -o all install BUILD="$build" PREFIX=/usr DESTDIR="$root" >"$dir/install.log" 2>&1; then
        pass "make install"
else
        fail "make install"; cat "$dir/install.log"
fi
for f in lib/systemd/system/npud.service lib/systemd/system/npud.socket lib/sysusers.d/npud.conf \
         lib/tmpfiles.d/npud.conf; do
        [ -f "$root/usr/$f" ] || fail "not installed: /usr/$f"
done
# The whole installed file list, as the README gives it (libraries in the multiarch directory).
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch)
(cd "$root" && find . ! -type d | sed 's|^\./|/|' | grep -v '/dist-packages/' | sort) >"$dir/installed"
cat >"$dir/expected-files" <<EOF
/usr/bin/npuctl
/usr/bin/npusim
/usr/include/npu-admin.h
/usr/include/npu.h
/usr/lib/$ma/libnpu.so
/usr/lib/$ma/libnpu.so.1
/usr/lib/$ma/pkgconfig/libnpu.pc
/usr/lib/systemd/system/npud.service
/usr/lib/systemd/system/npud.socket
/usr/lib/sysusers.d/npud.conf
/usr/lib/tmpfiles.d/npud.conf
/usr/lib/udev/rules.d/60-npud.rules
/usr/sbin/npud
/usr/share/bash-completion/completions/npuctl
/usr/share/dbus-1/interfaces/org.npud.Device1.xml
/usr/share/dbus-1/interfaces/org.npud.Manager1.xml
/usr/share/dbus-1/interfaces/org.npud.Session1.xml
/usr/share/dbus-1/interfaces/org.npud.Tenant1.xml
/usr/share/dbus-1/system.d/org.npud.Manager1.conf
/usr/share/doc/npud/dbus.md
/usr/share/doc/npud/examples/npud.conf
/usr/share/npud/slurm/npud-epilog
/usr/share/npud/slurm/npud-prolog
/usr/share/man/man3/libnpu.3
/usr/share/man/man5/npud.conf.5
/usr/share/man/man8/npuctl.8
/usr/share/man/man8/npud.8
EOF
sort -o "$dir/expected-files" "$dir/expected-files"
diff "$dir/expected-files" "$dir/installed" >"$dir/files.diff" && pass "installed file list (DESTDIR)" \
        || { fail "installed files differ from the expected list:"; cat "$dir/files.diff"; }
ls "$root"/usr/lib/python3*/dist-packages/npu*.so >/dev/null 2>&1 || fail "the Python module is not installed"
cmp -s "$root/usr/share/doc/npud/examples/npud.conf" docs/npud.conf.example || fail "example configuration differs"
# The udev rule: the device and manager nodes, group npu, 0660, and the PM QoS node npud's
# own, 0600; nothing else matched.
rules=$root/usr/lib/udev/rules.d/60-npud.rules
python3 - "$rules" >"$dir/udev.out" 2>&1 <<'PY'
import fnmatch, re, sys
rules = []
qos = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    if line == 'KERNEL=="cpu_dma_latency", OWNER="npud", MODE="0600"':
        qos += 1
        continue
    m = re.fullmatch(r'KERNEL=="([^"]+)", GROUP="npu", MODE="0660"', line)
    assert m, "unexpected rule: " + line
    rules.append(m.group(1))
def matched(name):
    return any(fnmatch.fnmatchcase(name, p) for r in rules for p in r.split("|"))
for name in ["davinci0", "davinci7", "davinci15", "davinci63", "davinci_manager", "devmm_svm", "hisi_hdc"]:
    assert matched(name), name + " is not matched"
for name in ["sda", "davinci", "tty0", "nvidia0", "cpu_dma_latency"]:
    assert not matched(name), name + " is matched"
assert qos == 1, "cpu_dma_latency: %d rules making it npud's 0600, want 1" % qos
PY
[ $? = 0 ] && pass "udev rule: davinci*, manager nodes -> group npu 0660; cpu_dma_latency -> npud 0600" || { fail "udev rule:"; cat "$dir/udev.out"; }
# Unit policy: devices by pattern, IP for local scrapers only, OOM score below clients'.
svc=$root/usr/lib/systemd/system/npud.service
[ "$(grep -c '^DeviceAllow=' "$svc")" -le 4 ] && grep -q '^DeviceAllow=char-davinci\* rw$' "$svc" \
        && pass "DeviceAllow= by pattern (char-davinci*)" || fail "DeviceAllow: $(grep DeviceAllow "$svc")"
grep -q '^IPAddressDeny=any$' "$svc" && grep -q '^IPAddressAllow=localhost$' "$svc" \
        && pass "IPAddressDeny=any, IPAddressAllow=localhost" || fail "IPAddress*: $(grep IPAddress "$svc")"
grep -Eq '^OOMScoreAdjust=-[0-9]+$' "$svc" && pass "OOMScoreAdjust" || fail "no OOMScoreAdjust"
grep -q '^ExecStart=/usr/sbin/npud' systemd/npud.service || fail "ExecStart is not /usr/sbin/npud"
grep -q '^ExecReload=.*/usr/bin/npuctl .*reload' systemd/npud.service || fail "ExecReload is not npuctl reload"

# verify resolves ExecStart= on the host, so check copies pointing at the built binaries.
units=$dir/units
mkdir -p "$units"
sed -e "s|/usr/sbin/npud|$npud|g" -e "s|/usr/bin/npuctl|$npuctl|g" \
        "$root/usr/lib/systemd/system/npud.service" >"$units/npud.service"
cp "$root/usr/lib/systemd/system/npud.socket" "$units/npud.socket"
systemd-analyze verify --man=no "$units/npud.service" "$units/npud.socket" >"$dir/verify.out" 2>&1
rc=$?
if [ $rc = 0 ] && [ ! -s "$dir/verify.out" ]; then
        pass "systemd-analyze verify is silent"
else
        fail "systemd-analyze verify (exit $rc):"; cat "$dir/verify.out"
fi

# A Unix-socket metrics listener under the unit: npud may write only its RuntimeDirectory
# (/run/npud is root's), which systemd makes npud:npu 0750; npud makes the socket 0660 in
# spite of UMask=0077, so a scraper in group npu connects. Run here with that umask.
grep -q '^RuntimeDirectory=npud-metrics$' systemd/npud.service && grep -q '^RuntimeDirectoryMode=0750$' systemd/npud.service \
        && pass "RuntimeDirectory=npud-metrics (0750) for a metrics socket" \
        || fail "npud.service has no RuntimeDirectory=npud-metrics with mode 0750"
grep -q '^UMask=0077$' systemd/npud.service || fail "npud.service: UMask is not 0077 (the check below assumes it)"
mdir=$dir/npud-metrics; mkdir -m 0750 "$mdir"
(umask 077; exec "$npud" --socket "$dir/m.sock" --sim-devices 1 --metrics-listen "$mdir/metrics.sock" \
        --log-level warn) 2>"$dir/m.log" &
mpid=$!
i=0; while [ ! -S "$mdir/metrics.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
mode=$(stat -c %a "$mdir/metrics.sock" 2>/dev/null)
[ "$mode" = 660 ] && pass "metrics socket is 0660 under UMask=0077" || { fail "metrics socket mode '$mode'"; cat "$dir/m.log"; }
python3 - "$mdir/metrics.sock" >"$dir/m.scrape" 2>&1 <<'EOF2'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
data = b""
while True:
    b = s.recv(65536)
    if not b: break
    data += b
sys.stdout.write(data.decode())
EOF2
grep -q '^npud_build_info' "$dir/m.scrape" && pass "metrics answer on the Unix socket" || { fail "no metrics on the Unix socket"; head -5 "$dir/m.scrape"; }
kill -TERM $mpid; wait $mpid || fail "npud (metrics socket) exit status"

systemd-analyze security --offline=true "$units/npud.service" >"$dir/security.out" 2>&1
exposure=$(sed -n 's/.*Overall exposure level for npud.service: \([0-9.]*\).*/\1/p' "$dir/security.out")
if [ -z "$exposure" ]; then
        fail "no exposure figure from systemd-analyze security"; tail -5 "$dir/security.out"
elif awk -v e="$exposure" 'BEGIN { exit !(e <= 3.0) }'; then
        pass "security exposure $exposure (at most 3.0)"
else
        fail "security exposure $exposure is above 3.0"; grep '✗' "$dir/security.out"
fi

# DeviceAllow= as systemd parsed it. verify stays silent on mistakes that leave a unit without
# its devices: "char-davinci*rw" (no space) is taken as a group named "davinci*rw" with the
# default rights rwm, and "/dev/davinci*" is a valid path that matches nothing (globs apply
# to char-/block- group names only, matched with fnmatch against /proc/devices). security
# prints the list systemd built, "SPEC:RIGHTS" each, so check that list: the NPU groups and
# the two manager nodes with rw and no m, nothing else but char-rtc:r (ProtectClock=), no
# glob in a path, and the group pattern matching the driver's names and nothing else.
check_device_acl() {
        python3 - "$1" <<'PY'
import fnmatch, re, sys
line = [l for l in open(sys.argv[1]) if re.search(r"DeviceAllow=", l)]
assert len(line) == 1, "no DeviceAllow= line in the security report"
m = re.search(r"device ACL with some special devices: (.*?)\s+[0-9.]+\s*$", line[0])
assert m, "unexpected DeviceAllow= report: " + line[0].strip()
acl = dict(e.rsplit(":", 1) for e in m.group(1).split())
want = {"char-davinci*": "rw", "/dev/devmm_svm": "rw", "/dev/hisi_hdc": "rw", "/dev/cpu_dma_latency": "w"}
for spec, rights in want.items():
    assert acl.get(spec) == rights, "%s: rights %r, want %r (acl %r)" % (spec, acl.get(spec), rights, acl)
extra = {k: v for k, v in acl.items() if k not in want and k != "char-rtc"}
assert not extra, "unexpected device ACL entries: %r" % extra
for spec in acl:
    assert not (spec.startswith("/dev/") and re.search(r"[*?\[]", spec)), spec + ": glob in a path matches nothing"
# Major names as the Ascend driver registers them in /proc/devices, next to others a host has.
group = "davinci*"
for name in ["davinci0", "davinci7", "davinci_manager"]:
    assert fnmatch.fnmatchcase(name, group), name + " is not allowed"
for name in ["mem", "pts", "nvidia", "devmm_svm", "hisi_hdc", "ttyS"]:
    assert not fnmatch.fnmatchcase(name, group), name + " is allowed"
PY
}
check_device_acl "$dir/security.out" >"$dir/acl.out" 2>&1 \
        && pass "DeviceAllow= as systemd parsed it: char-davinci*:rw, the manager nodes rw, cpu_dma_latency w" \
        || { fail "DeviceAllow= as systemd parsed it:"; cat "$dir/acl.out"; }
# ... and the check catches the mistakes verify lets through.
for bad in 'char-davinci*rw' '/dev/davinci* rw' 'char-davinci* rwm'; do
        sed "s|^DeviceAllow=char-davinci\\* rw\$|DeviceAllow=$bad|" "$units/npud.service" >"$dir/bad.service"
        systemd-analyze security --offline=true "$dir/bad.service" >"$dir/bad.out" 2>&1
        if check_device_acl "$dir/bad.out" >/dev/null 2>&1; then
                fail "the DeviceAllow= check accepts 'DeviceAllow=$bad'"
        fi
done

mkdir -p "$root/etc"
if systemd-sysusers --root="$root" >"$dir/sysusers.out" 2>&1; then
        for g in npu npuadm; do
                grep -q "^$g:" "$root/etc/group" || fail "sysusers: no group $g"
        done
        grep -q '^npud:' "$root/etc/passwd" && pass "systemd-sysusers accepts npud.sysusers" \
                || fail "sysusers: no user npud"
else
        fail "systemd-sysusers"; cat "$dir/sysusers.out"
fi
systemd-tmpfiles --root="$root" --create >"$dir/tmpfiles.out" 2>&1
rc=$?
npu_gid=$(awk -F: '$1 == "npu" { print $3 }' "$root/etc/group")
want="755 0 $npu_gid"
if [ "$(id -u)" != 0 ]; then
        # Only root may give the directory away; everything else must still pass.
        grep -v '^fchownat() of .* failed: Operation not permitted$' "$dir/tmpfiles.out" >"$dir/tmpfiles.rest"
        mv "$dir/tmpfiles.rest" "$dir/tmpfiles.out"
        [ -s "$dir/tmpfiles.out" ] || rc=0
        want="755 $(id -u) $(id -g)"
fi
got=$(stat -c '%a %u %g' "$root/run/npud" 2>/dev/null)
if [ $rc = 0 ] && [ ! -s "$dir/tmpfiles.out" ] && [ "$got" = "$want" ]; then
        pass "systemd-tmpfiles creates /run/npud 0755 root:npu"
else
        fail "systemd-tmpfiles (exit $rc): /run/npud is '$got', expected '$want'"; cat "$dir/tmpfiles.out"
fi

# --- 4: socket activation ---------------------------------------------------------------------
asock=$dir/act.sock
systemd-socket-activate -l "$asock" "$npud" --socket "$dir/unused.sock" --sim-devices 1 \
        --log-level info >"$dir/act.log" 2>&1 &
apid=$!; pids="$pids $apid"
wait_for "$dir/act.log" "Listening on" || fail "systemd-socket-activate did not listen"
ino_before=$(stat -c %i "$asock" 2>/dev/null)
# The first connection makes systemd-socket-activate exec npud (same pid) with the socket.
if "$npuctl" --socket "$asock" devices >"$dir/out" 2>&1 && grep -q 910B3 "$dir/out"; then
        pass "npuctl devices over the activated socket"
else
        fail "npuctl devices over the activated socket: $(cat "$dir/out")"; cat "$dir/act.log"
fi
grep -q "passed by the service manager: $asock" "$dir/act.log" && pass "npud uses the passed socket" \
        || { fail "npud did not report the passed socket"; cat "$dir/act.log"; }
[ -e "$dir/unused.sock" ] && fail "npud bound --socket although a socket was passed"
kill -TERM $apid
wait $apid || fail "activated npud exit status"
ino_after=$(stat -c %i "$asock" 2>/dev/null)
[ -S "$asock" ] && [ "$ino_before" = "$ino_after" ] && pass "activated socket left in place" \
        || fail "activated socket removed or replaced ($ino_before -> $ino_after)"

# --- 5: sd_notify -------------------------------------------------------------------------------
# The test is the service manager: a datagram socket logging "<monotonic us> <fields|...>".
cat >"$dir/listener.py" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as log:
    while True:
        msg = s.recv(4096).decode()
        log.write("%d %s\n" % (time.monotonic_ns() // 1000, msg.strip().replace("\n", "|")))
        log.flush()
EOF
nsock=$dir/notify.sock
nlog=$dir/notify.log
: >"$nlog"
python3 "$dir/listener.py" "$nsock" "$nlog" &
lpid=$!; pids="$pids $lpid"
i=0; while [ ! -S "$nsock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
sock=$dir/npud.sock
# exec keeps the pid, so WATCHDOG_PID=$$ names npud itself.
NOTIFY_SOCKET=$nsock WATCHDOG_USEC=200000 sh -c 'WATCHDOG_PID=$$ exec "$0" "$@"' \
        "$npud" --socket "$sock" --sim-devices 1 --log-level debug 2>"$dir/notify-npud.log" &
npid=$!; pids="$pids $npid"
# A notification line from the listener's log received at or after $start matching $1.
since_start() { awk -v t="$start" -v re="$1" '$1 >= t && $0 ~ re { f = 1 } END { exit !f }' "$nlog"; }
ready_after_reload() {
        awk '/ RELOADING=1/ { r = NR } r && NR > r && / READY=1/ { ok = 1 } END { exit !ok }' "$nlog"
}
if wait_for "$nlog" " READY=1[|]STATUS=1 device .0 failed., 0 sessions$"; then
        pass "READY=1 with STATUS= once listening"
        "$npuctl" --socket "$sock" version >/dev/null 2>&1 || fail "npud not serving after READY=1"
else
        fail "no READY=1/STATUS="; cat "$nlog" "$dir/notify-npud.log"
fi
wait_for "$nlog" " WATCHDOG=1$" 20 && sleep 0.5 && [ "$(grep -c ' WATCHDOG=1$' "$nlog")" -ge 3 ] \
        && pass "WATCHDOG=1 every half interval" || fail "watchdog pings: $(grep -c WATCHDOG "$nlog")"
# Five clients at once for 1.5 s: STATUS= follows, but at most once a second.
sleep 1
start=$(python3 -c 'import time; print(time.monotonic_ns() // 1000)')
python3 - "$sock" <<'PY'
import socket, sys, time
conns = []
for _ in range(5):
    c = socket.socket(socket.AF_UNIX)
    c.connect(sys.argv[1])
    conns.append(c)
    time.sleep(0.05)
time.sleep(1.5)
PY
wait_until 20 since_start "^[0-9]+ STATUS=1 device .0 failed., 5 sessions$" \
        && pass "STATUS= counts sessions" || fail "no STATUS= with 5 sessions: $(grep STATUS "$nlog" | tail -3)"
wait_until 20 since_start "^[0-9]+ STATUS=1 device .0 failed., 0 sessions$" \
        && pass "STATUS= after the sessions closed" || fail "no STATUS= after closing"
n=$(awk -v t="$start" '$1 >= t && $2 ~ /^STATUS=/' "$nlog" | wc -l)
[ "$n" -le 3 ] && pass "STATUS= rate-limited ($n updates for 10 session changes)" \
        || fail "$n STATUS= updates for 10 session changes"
kill -HUP $npid
if wait_for "$nlog" " RELOADING=1[|]MONOTONIC_USEC=[0-9]+$"; then
        line=$(grep " RELOADING=1|MONOTONIC_USEC=" "$nlog" | tail -1)
        at=${line%% *}
        usec=${line##*=}
        # MONOTONIC_USEC must be CLOCK_MONOTONIC, like the listener's own clock.
        awk -v a="$at" -v u="$usec" 'BEGIN { d = a - u; exit !(d >= 0 && d < 5000000) }' \
                && pass "RELOADING=1 with MONOTONIC_USEC= on SIGHUP" \
                || fail "MONOTONIC_USEC=$usec is not near the monotonic clock ($at)"
        wait_until 50 ready_after_reload && pass "READY=1 after the reload" \
                || fail "no READY=1 after RELOADING=1"
else
        fail "no RELOADING=1 with MONOTONIC_USEC= on SIGHUP"; tail -5 "$nlog"; tail -5 "$dir/notify-npud.log"
fi
kill -0 $npid 2>/dev/null && pass "npud survives SIGHUP" || fail "npud died on SIGHUP"
kill -TERM $npid
wait $npid || fail "npud exit status after SIGTERM"
grep -q " STOPPING=1" "$nlog" && pass "STOPPING=1 on SIGTERM" || fail "no STOPPING=1: $(tail -3 "$nlog")"
# Without a service manager nothing is sent and nothing breaks: the other tests run npud so.

# --- 6: logging -----------------------------------------------------------------------------------
# $JOURNAL_STREAM that is not fd 2 (a child of a service whose stderr was redirected): plain.
mport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
JOURNAL_STREAM=1:1 "$npud" --socket "$sock" --sim-devices 1 --log-level debug \
        --metrics-listen "127.0.0.1:$mport" 2>"$dir/plain.log" &
ppid=$!; pids="$pids $ppid"
wait_for "$dir/plain.log" "npud ready" || fail "npud did not start with a foreign JOURNAL_STREAM"
"$npuctl" --socket "$sock" version >/dev/null 2>&1
wait_for "$dir/plain.log" "session [0-9]+ closed"
kill -TERM $ppid; wait $ppid
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z npud\[debug\]: session [0-9]+ opened: pid' "$dir/plain.log" \
        && pass "plain log lines with a UTC timestamp when JOURNAL_STREAM is not stderr; sessions at debug" \
        || { fail "plain log lines"; cat "$dir/plain.log"; }
grep -Eq "npud\[info\]: metrics: listening on http://127\.0\.0\.1:$mport/metrics" "$dir/plain.log" \
        && pass "the metrics address is logged at start" \
        || { fail "metrics address not logged"; cat "$dir/plain.log"; }
# JOURNAL_STREAM naming fd 2: entries go to /run/systemd/journal/socket with fields. A private
# mount namespace with a tmpfs on /run lets a fake journald listen there.
cat >"$dir/journal.py" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/run/systemd/journal/socket")
open(sys.argv[1] + ".ready", "w").close()
with open(sys.argv[1], "a") as log:
    while True:
        log.write(s.recv(65536).decode(errors="replace").replace("\n", "|") + "\n")
        log.flush()
EOF
cat >"$dir/journal.sh" <<'EOF'
set -u
mount -t tmpfs tmpfs /run || exit 77
mkdir -p /run/systemd/journal
python3 "$1/journal.py" "$1/journal.log" &
jpid=$!
i=0; while [ ! -e "$1/journal.log.ready" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
: >"$1/stderr.log"
exec 2>>"$1/stderr.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$1/stderr.log") "$2" --socket "$1/j.sock" --sim-devices 1 --log-level debug &
npid=$!
i=0; while ! "$3" --socket "$1/j.sock" version >/dev/null 2>&1 && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
"$3" --socket "$1/j.sock" drain 0 >/dev/null 2>&1
"$3" --socket "$1/j.sock" fault inject 0 fail-device >/dev/null 2>&1
sleep 0.3
kill -TERM $npid; wait $npid
kill $jpid
EOF
rc=77
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        : >"$dir/journal.log"
        unshare -m sh "$dir/journal.sh" "$dir" "$npud" "$npuctl" 2>"$dir/unshare.err"
        rc=$?
fi
if [ $rc = 77 ] || grep -q "unshare failed" "$dir/unshare.err" 2>/dev/null; then
        echo "skip: structured journal entries (needs root and a mount namespace)"
else
        if grep 'MESSAGE=device 0 draining' "$dir/journal.log" | grep 'by uid 0 pid [0-9]* via socket' \
                | grep 'MESSAGE_ID=85fa777a48334f35bc05377e5655c824' | grep 'NPUD_UID=0' \
                | grep 'NPUD_VIA=socket' | grep 'NPUD_PID=' | grep -q 'NPUD_DEVICE=0'; then
                pass "admin actions name who did them: MESSAGE_ID, NPUD_UID, NPUD_PID, NPUD_VIA"
        else
                fail "audit entry of a drain"; cat "$dir/journal.log"
        fi
        grep 'MESSAGE=device 0 failed' "$dir/journal.log" | grep 'PRIORITY=3' \
                | grep -q 'MESSAGE_ID=4a87292b65194eb4978a5af1e72c0f32' \
                && pass "a device failure is logged at error" || { fail "device failure entry"; cat "$dir/journal.log"; }
        if grep 'MESSAGE=session [0-9]* opened' "$dir/journal.log" | grep 'NPUD_SESSION=' \
                | grep 'NPUD_PID=' | grep 'NPUD_TENANT=' | grep 'PRIORITY=7' \
                | grep -q 'SYSLOG_IDENTIFIER=npud'; then
                pass "journal entries carry NPUD_SESSION, NPUD_PID, NPUD_TENANT, PRIORITY, SYSLOG_IDENTIFIER"
        else
                fail "structured journal entries"; cat "$dir/journal.log" "$dir/stderr.log" "$dir/unshare.err"
        fi
        grep -q "session" "$dir/stderr.log" && fail "session lines also went to stderr"
fi

# --- 7: --check-config ------------------------------------------------------------------------
# The example names admin_group npuadm (systemd-sysusers creates it); a group named in the
# configuration must exist, so on a host without it check a copy naming this user's group.
example=docs/npud.conf.example
getent group npuadm >/dev/null || { sed "s/\"npuadm\"/\"$(id -gn)\"/" $example >"$dir/example.conf"; example=$dir/example.conf; }
"$npud" --check-config $example >"$dir/out" 2>&1 && grep -q "configuration OK" "$dir/out" \
        && pass "docs/npud.conf.example passes --check-config" || fail "example config: $(cat "$dir/out")"
"$npud" --check-config="$(realpath $example)" >"$dir/out" 2>&1 \
        && pass "--check-config=PATH" || fail "--check-config=PATH: $(cat "$dir/out")"
"$npud" --config $example --check-config >"$dir/out" 2>&1 \
        && pass "--check-config checks --config" || fail "--check-config with --config: $(cat "$dir/out")"
printf '{"sim": {"devices": 2}, "limits": {"max_bufers": 3}}' >"$dir/bad.conf"
"$npud" --check-config "$dir/bad.conf" >"$dir/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "limits.max_bufers" "$dir/out" && pass "bad config: exit 2 naming the key" \
        || fail "bad config: exit $rc: $(cat "$dir/out")"
printf '{"workers": -1}' >"$dir/bad2.conf"
"$npud" --check-config "$dir/bad2.conf" >"$dir/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "workers" "$dir/out" && pass "bad value: exit 2 naming the key" \
        || fail "bad value: exit $rc: $(cat "$dir/out")"
"$npud" --check-config "$dir/none.conf" >"$dir/out" 2>&1
[ $? = 2 ] && pass "missing config: exit 2" || fail "missing config: $(cat "$dir/out")"

[ $fails = 0 ] && echo "systemd: all checks passed" || echo "systemd: $fails check(s) failed"
[ $fails = 0 ]
