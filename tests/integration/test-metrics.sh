#!/bin/sh
# Prometheus /metrics: npud serves it over TCP (configured in the file) and on a Unix socket
# (--metrics-listen); after the examples ran, the scrape passes `promtool check metrics`
# without a word, carries the expected series with sensible values, and other paths and
# methods get 404 and 405. Bad listen addresses exit 2 naming the key. promtool comes from
# Debian's prometheus package, unpacked (not installed) under build/tools and kept there.
set -u
build=${1:-build}
npud=$build/bin/npud
tools=build/tools
dir=$(mktemp -d /tmp/npud-metrics-XXXXXX)
fails=0
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# promtool: the cached copy, else one on PATH, else fetch the .deb and take the binary out.
get_promtool() {
        if [ -x "$tools/promtool" ]; then echo "$tools/promtool"; return 0; fi
        if command -v promtool >/dev/null 2>&1; then command -v promtool; return 0; fi
        mkdir -p "$tools" || return 1
        fetch=$(mktemp -d "$tools/.fetch-XXXXXX") || return 1
        (cd "$fetch" && { apt-get download prometheus >/dev/null 2>&1 ||
                { [ "$(id -u)" = 0 ] && apt-get update >/dev/null 2>&1 &&
                  apt-get download prometheus >/dev/null 2>&1; }; } &&
                dpkg -x prometheus_*.deb root && [ -x root/usr/bin/promtool ]) &&
                mv "$fetch/root/usr/bin/promtool" "$tools/promtool"
        rm -rf "$fetch"
        [ -x "$tools/promtool" ] && echo "$tools/promtool"
}

# scrape URL|unix:PATH:URLPATH METHOD OUT: writes the body to OUT, the status and the
# Content-Type to OUT.status / OUT.type.
scrape() {
        s_target=$1; s_method=$2; s_out=$3
        case $s_target in
        unix:*) s_rest=${s_target#unix:}; s_sock=${s_rest%%:*}; s_path=${s_rest#*:}
                s_url=http://localhost$s_path ;;
        *) s_sock=""; s_url=$s_target ;;
        esac
        if command -v curl >/dev/null 2>&1; then
                set -- -s -X "$s_method" -o "$s_out" -D "$s_out.hdr" -w '%{http_code}' "$s_url"
                [ -n "$s_sock" ] && set -- --unix-socket "$s_sock" "$@"
                curl "$@" >"$s_out.status" 2>/dev/null || echo 000 >"$s_out.status"
                tr -d '\r' <"$s_out.hdr" | sed -n 's/^[Cc]ontent-[Tt]ype: //p' >"$s_out.type"
        else
                python3 - "$s_sock" "$s_url" "$s_method" "$s_out" <<'EOF'
import http.client, socket, sys, urllib.parse
s_sock, url, method, out = sys.argv[1:]
u = urllib.parse.urlsplit(url)
class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(s_sock)
try:
    c = UnixConnection("localhost") if s_sock else http.client.HTTPConnection(u.hostname, u.port)
    c.request(method, u.path)
    r = c.getresponse()
    open(out, "wb").write(r.read())
    open(out + ".status", "w").write(str(r.status))
    open(out + ".type", "w").write((r.getheader("Content-Type") or "") + "\n")
except OSError:
    open(out, "wb").close()
    open(out + ".status", "w").write("000")
    open(out + ".type", "w").write("\n")
EOF
        fi
}

# value FILE SERIES: the sample value of one exact series (empty when absent).
value() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
# sum FILE PREFIX: sum of the samples whose series starts with PREFIX.
sum() { awk -v p="$2" 'index($1, p) == 1 { s += $2 } END { printf "%.0f\n", s }' "$1"; }

wait_up() { # npud socket, metrics target: both answer, or give up after 5 s
        i=0
        while [ $i -lt 250 ]; do
                if [ -S "$1" ]; then
                        scrape "$2" GET "$dir/probe"
                        [ "$(cat "$dir/probe.status")" = 200 ] && return 0
                fi
                kill -0 $pid 2>/dev/null || return 1
                sleep 0.02; i=$((i + 1))
        done
        return 1
}

stop_npud() { # what
        kill -TERM $pid
        if wait $pid; then pass "$1: npud exits 0"; else fail "$1: npud exit status"; cat "$dir/npud.log"; fi
        pid=""
}

# A clean scrape: 200, the exposition content type, promtool says nothing and exits 0.
check_scrape() { # file what
        [ "$(cat "$1.status")" = 200 ] && pass "$2: 200" || fail "$2: status $(cat "$1.status")"
        grep -q '^text/plain; version=0.0.4' "$1.type" && pass "$2: content type" \
                || fail "$2: content type '$(cat "$1.type")'"
        "$promtool" check metrics <"$1" >"$1.lint" 2>&1
        rc=$?
        if [ $rc = 0 ] && [ ! -s "$1.lint" ]; then pass "$2: promtool check metrics is clean"
        else fail "$2: promtool check metrics exit $rc:"; cat "$1.lint"; fi
        [ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ] || fail "$2: no final newline"
}

promtool=$(get_promtool)
if [ -z "$promtool" ]; then
        fail "promtool: not cached in $tools, not on PATH, and 'apt-get download prometheus' failed"
        echo "metrics: $fails check(s) failed"
        exit 1
fi
pass "promtool: $promtool"

# Bad listen addresses are usage errors naming the key or option.
printf '{"metrics": {"listen": "localhost"}}' >"$dir/bad.conf"
"$npud" --config "$dir/bad.conf" >/dev/null 2>"$dir/err"
[ $? = 2 ] && grep -q "metrics.listen" "$dir/err" && pass "bad metrics.listen exits 2 naming it" \
        || fail "bad metrics.listen: $(cat "$dir/err")"
printf '{"metrics": {"port": 9464}}' >"$dir/bad2.conf"
"$npud" --config "$dir/bad2.conf" >/dev/null 2>"$dir/err"
[ $? = 2 ] && grep -q "metrics.port" "$dir/err" && pass "unknown metrics key exits 2 naming it" \
        || fail "unknown metrics key: $(cat "$dir/err")"
"$npud" --metrics-listen 127.0.0.1:99999 >/dev/null 2>"$dir/err"
[ $? = 2 ] && grep -q -- "--metrics-listen" "$dir/err" && pass "bad --metrics-listen exits 2 naming it" \
        || fail "bad --metrics-listen: $(cat "$dir/err")"

# TCP, from the config file, on a free port of 127.0.0.1; this user's sessions belong to a
# latency-critical tenant.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sock=$dir/npud.sock
url=http://127.0.0.1:$port
printf '{"sim": {"devices": 2, "profile": "910B3"}, "metrics": {"listen": "127.0.0.1:%s"},
  "tenants": [{"name": "lc-team", "class": "latency-critical", "uids": [%s]}]}\n' "$port" "$(id -u)" >"$dir/npud.conf"
"$npud" --config "$dir/npud.conf" --socket "$sock" --log-level warn 2>"$dir/npud.log" &
pid=$!
if ! wait_up "$sock" "$url/metrics"; then
        fail "npud with metrics on $url did not come up"; cat "$dir/npud.log"
        echo "metrics: $fails check(s) failed"; exit 1
fi
for ex in "$build/bin/example-matmul" "$build/bin/example-two_streams"; do
        "$ex" "$sock" >/dev/null || fail "$ex failed"
done
# A connected client shows in npud_sessions.
python3 -c "import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(20)" "$sock" &
holder=$!
m=$dir/tcp.txt
i=0
while :; do
        scrape "$url/metrics" GET "$m"
        n=$(value "$m" npud_sessions)
        [ "${n:-0}" -ge 1 ] || [ $i -ge 250 ] && break
        sleep 0.02; i=$((i + 1))
done
kill $holder 2>/dev/null; wait $holder 2>/dev/null
check_scrape "$m" "tcp scrape"

[ "$(value "$m" 'npud_build_info{version="0.1.0"}')" = 1 ] || grep -q '^npud_build_info{version="[^"]*"} 1$' "$m" \
        && pass "build_info" || fail "npud_build_info missing"
for dev in 0 1; do
        v=$(value "$m" "npud_device_memory_total_bytes{device=\"$dev\"}")
        [ "$v" = 68719476736 ] && pass "device $dev memory total 64 GiB" || fail "device $dev memory total '$v'"
        v=$(value "$m" "npud_device_memory_used_bytes{device=\"$dev\"}")
        [ -n "$v" ] && pass "device $dev memory used $v" || fail "device $dev memory used missing"
        [ "$(value "$m" "npud_device_health{device=\"$dev\",state=\"ok\"}")" = 1 ] &&
                [ "$(value "$m" "npud_device_health{device=\"$dev\",state=\"failed\"}")" = 0 ] \
                && pass "device $dev health ok" || fail "device $dev health"
        [ "$(value "$m" "npud_device_draining{device=\"$dev\"}")" = 0 ] || fail "device $dev draining"
        [ "$(value "$m" "npud_engine_cores{device=\"$dev\",engine=\"cube\"}")" = 20 ] &&
                [ "$(value "$m" "npud_engine_cores{device=\"$dev\",engine=\"vector\"}")" = 40 ] &&
                [ "$(value "$m" "npud_engine_cores{device=\"$dev\",engine=\"aicpu\"}")" = 6 ] \
                && pass "device $dev engine cores 20/40/6" || fail "device $dev engine cores"
        [ "$(value "$m" "npud_queue_depth{device=\"$dev\"}")" = 0 ] && pass "device $dev queue depth 0" \
                || fail "device $dev queue depth '$(value "$m" "npud_queue_depth{device=\"$dev\"}")'"
done
# identity and telemetry series
for dev in 0 1; do
        grep -Eq "^npud_device_info\{device=\"$dev\",uuid=\"[0-9a-f-]{36}\",serial=\"[^\"]+\",profile=\"910B3\",bus_id=\"0000:[0-9a-f]{2}:00.0\",firmware=\"[^\"]+\",driver=\"[^\"]+\"\} 1$" "$m" \
                && pass "device $dev info" || fail "device $dev info: $(grep npud_device_info "$m")"
        t=$(value "$m" "npud_device_temperature_celsius{device=\"$dev\"}")
        p=$(value "$m" "npud_device_power_watts{device=\"$dev\"}")
        python3 -c "import sys; t,p=float(sys.argv[1]),float(sys.argv[2]); assert 30 <= t <= 80 and 80 <= p <= 350" "$t" "$p" 2>/dev/null \
                && pass "device $dev temperature $t C, power $p W" || fail "device $dev temperature '$t' power '$p'"
        [ "$(value "$m" "npud_device_power_limit_watts{device=\"$dev\"}")" = 350 ] &&
                [ "$(value "$m" "npud_device_clock_mhz{device=\"$dev\"}")" = 1800 ] &&
                [ "$(value "$m" "npud_device_ecc_errors_total{device=\"$dev\",type=\"uncorrected\"}")" = 0 ] &&
                [ -n "$(value "$m" "npud_engine_utilization_ratio{device=\"$dev\",engine=\"cube\"}")" ] \
                && pass "device $dev power limit, clock, ECC, utilization gauge" || fail "device $dev clock/ECC/utilization series"
done
busy=$(awk '$1 ~ /^npud_engine_busy_seconds_total\{device="0",engine="(cube|dma)"\}$/ && $2 > 0' "$m" | wc -l)
[ "$busy" = 2 ] && pass "cube and dma busy seconds > 0 on device 0" || fail "engine busy seconds: $(grep busy_seconds "$m")"
done_tasks=$(sum "$m" 'npud_tasks_total{tenant="lc-team",device="0",status="completed"}')
[ "$done_tasks" -gt 0 ] && pass "npud_tasks_total{tenant=\"lc-team\"} completed = $done_tasks" \
        || fail "no completed tasks counted for the tenant: $(grep '^npud_tasks_total' "$m")"
[ "$(value "$m" 'npud_task_latency_seconds_count{class="latency-critical"}')" -gt 0 ] \
        && pass "latency counted under the tenant's class" || fail "latency-critical count"
[ "$(sum "$m" 'npud_tasks_total{')" = "$(sum "$m" 'npud_task_latency_seconds_count{')" ] \
        && pass "latency histogram counts every task" || fail "histogram count != tasks_total"
[ "$(value "$m" 'npud_task_latency_seconds_bucket{class="normal",le="+Inf"}')" = "$(value "$m" 'npud_task_latency_seconds_count{class="normal"}')" ] \
        && pass "+Inf bucket = count" || fail "+Inf bucket != count"
grep -q '^npud_task_latency_seconds_bucket{class="latency-critical",le="1e-05"} ' "$m" &&
        grep -q '^npud_task_latency_seconds_bucket{class="best-effort",le="10"} ' "$m" \
        && pass "histogram buckets 10 us to 10 s per class" || fail "histogram buckets"
s=$(value "$m" npud_sessions)
[ -n "$s" ] && [ "$s" -ge 1 ] && pass "npud_sessions = $s with a client connected" || fail "npud_sessions '$s'"
awk '$1 == "npud_uptime_seconds" && $2 > 0 { ok = 1 } END { exit !ok }' "$m" && pass "uptime > 0" || fail "uptime"
grep -Eq 'pid=|session=' "$m" && fail "per-session or per-pid labels" || pass "no session or pid labels"

# Failed and cancelled-behind-a-failure tasks: metrics and npuctl sched count them alike, and
# a tenant a reload removes keeps its series and its sched rows (marked removed) alike.
npuctl=$build/bin/npuctl
if [ "$(id -u)" = 0 ] && [ -x "$npuctl" ]; then
        # injected ECC errors reach the counter
        "$npuctl" --socket "$sock" fault inject 1 ecc-corrected 7 >/dev/null || fail "fault inject ecc-corrected"
        scrape "$url/metrics" GET "$dir/ecc.txt"
        [ "$(value "$dir/ecc.txt" 'npud_device_ecc_errors_total{device="1",type="corrected"}')" = 7 ] \
                && pass "npud_device_ecc_errors_total counts injected ECC errors" \
                || fail "ECC counter: $(grep ecc_errors "$dir/ecc.txt")"
        "$npuctl" --socket "$sock" fault inject 0 fail-next 1 >/dev/null || fail "fault inject"
        "$build/bin/example-matmul" "$sock" >/dev/null 2>&1 && fail "fail-next did not fail example-matmul"
        agree() { # WHAT: metrics and sched agree on lc-team's device-0 failed/cancelled counts
                scrape "$url/metrics" GET "$dir/m2.txt"
                "$npuctl" --socket "$sock" --json sched >"$dir/sched.json"
                mf=$(sum "$dir/m2.txt" 'npud_tasks_total{tenant="lc-team",device="0",status="failed"}')
                mc=$(sum "$dir/m2.txt" 'npud_tasks_total{tenant="lc-team",device="0",status="cancelled"}')
                mt=$(sum "$dir/m2.txt" 'npud_tasks_total{tenant="lc-team",device="0",')
                python3 -c "import json,sys
t=[x for x in json.load(open(sys.argv[1]))[0]['tenants'] if x['name']=='lc-team'][0]
assert (t['failed'], t['cancelled'], t['tasks']) == tuple(map(int, sys.argv[2:5])), (t, sys.argv[2:])
assert t['failed'] >= 1 and t['removed'] == (sys.argv[5] == 'removed'), t" "$dir/sched.json" "$mf" "$mc" "$mt" "$2" 2>"$dir/err" \
                        && pass "$1: metrics and sched agree (failed $mf, cancelled $mc, tasks $mt)" \
                        || fail "$1: $(cat "$dir/err")"
        }
        agree "after a failure" current
        printf '{"sim": {"devices": 2, "profile": "910B3"}, "metrics": {"listen": "127.0.0.1:%s"},
  "tenants": [{"name": "other", "class": "normal"}]}\n' "$port" >"$dir/npud.conf"
        "$npuctl" --socket "$sock" reload >/dev/null || fail "reload removing lc-team"
        agree "after a reload removed the tenant" removed
        grep -q "tenant 'lc-team': a task failed" "$dir/npud.log" && pass "a failed task is logged" \
                || fail "no failure line: $(cat "$dir/npud.log")"
        # a burst of failures within 10 s (now of tenant default): one line at once, the rest
        # summed up in one line (here at exit)
        "$npuctl" --socket "$sock" fault inject 0 fail-next 5 >/dev/null || fail "fault inject 5"
        for i in 1 2 3 4 5; do "$build/bin/example-matmul" "$sock" >/dev/null 2>&1; done
        failsum=1
fi

scrape "$url/other" GET "$dir/other"

[ "$(cat "$dir/other.status")" = 404 ] && pass "GET /other is 404" || fail "GET /other: $(cat "$dir/other.status")"
scrape "$url/metrics" POST "$dir/post"
[ "$(cat "$dir/post.status")" = 405 ] && pass "POST /metrics is 405" || fail "POST /metrics: $(cat "$dir/post.status")"
stop_npud "tcp"
if [ "${failsum:-0}" = 1 ]; then
        n=$(grep -c "tenant 'default': a task failed" "$dir/npud.log")
        [ "$n" = 1 ] && pass "5 failures within 10 s: one immediate line" || fail "$n immediate failure lines: $(cat "$dir/npud.log")"
        grep -q "tenant 'default': 4 task(s) failed in the last [0-9]* s" "$dir/npud.log" \
                && pass "the rest summed up in one line (flushed at exit)" || fail "no summary line: $(cat "$dir/npud.log")"
fi

# Unix socket, from the command line.
msock=$dir/metrics.sock
"$npud" --socket "$sock" --sim-devices 1 --metrics-listen "$msock" --log-level warn 2>"$dir/npud.log" &
pid=$!
if wait_up "$sock" "unix:$msock:/metrics"; then
        "$build/bin/example-matmul" "$sock" >/dev/null || fail "example-matmul failed"
        m=$dir/unix.txt
        scrape "unix:$msock:/metrics" GET "$m"
        check_scrape "$m" "unix scrape"
        v=$(value "$m" 'npud_device_memory_total_bytes{device="0"}')
        [ "$v" = 68719476736 ] && pass "unix: memory total 64 GiB" || fail "unix: memory total '$v'"
        [ "$(sum "$m" 'npud_tasks_total{tenant="default",device="0",status="completed"}')" -gt 0 ] &&
                [ "$(value "$m" 'npud_task_latency_seconds_count{class="normal"}')" -gt 0 ] \
                && pass "unix: tasks counted under tenant default, class normal" || fail "unix: no tasks counted"
        scrape "unix:$msock:/other" GET "$dir/uother"
        [ "$(cat "$dir/uother.status")" = 404 ] && pass "unix: /other is 404" || fail "unix: /other: $(cat "$dir/uother.status")"
        stop_npud "unix"
        [ -e "$msock" ] && fail "metrics socket left behind" || pass "metrics socket removed at exit"
else
        fail "npud with metrics on $msock did not come up"; cat "$dir/npud.log"
fi

# Faults, resets and task errors by kind; tenant memory gauges; scrape cost with 256 tenants
# and 1,000 sessions: the file's limit of 255 tenants and the implicit "default"; session i
# joins tenant t<i mod 255> and holds 4 KiB on device 0.
crowd=$build/tests/npuctl-crowd
npuctl=$build/bin/npuctl
if [ -x "$crowd" ]; then
        ulimit -n "$(ulimit -Hn)" 2>/dev/null
        python3 - "$(id -u)" >"$dir/crowd.conf" <<'EOF'
import json, sys
uid = int(sys.argv[1])
t = [{"name": "t%d" % i, "uids": [uid], "memory_quota": {"total": (i + 1) << 20}} for i in range(255)]
t[254].pop("memory_quota")
print(json.dumps({"sim": {"devices": 2}, "tenants": t,
                  "limits": {"max_connections": 1100, "max_connections_per_uid": 1100}}))
EOF
        "$npud" --config "$dir/crowd.conf" --socket "$sock" --metrics-listen "$msock" --log-level error 2>"$dir/npud.log" &
        pid=$!
        if wait_up "$sock" "unix:$msock:/metrics"; then
                "$npuctl" --socket "$sock" fault inject 0 fail-next 1 >/dev/null || fail "fault inject"
                "$build/bin/example-matmul" "$sock" >/dev/null 2>&1
                "$npuctl" --socket "$sock" reset 1 >/dev/null || fail "reset 1"
                mkfifo "$dir/crowd.in"
                "$crowd" "$sock" 1000 255 4096 <"$dir/crowd.in" >"$dir/crowd.out" 2>&1 &
                cpid=$!
                exec 7>"$dir/crowd.in"
                i=0; while ! grep -q ready "$dir/crowd.out" && kill -0 $cpid 2>/dev/null && [ $i -lt 600 ]; do
                        sleep 0.05; i=$((i + 1)); done
                if grep -q "ready 1000" "$dir/crowd.out"; then
                        m=$dir/crowd.txt
                        t0=$(date +%s%N)
                        scrape "unix:$msock:/metrics" GET "$m"
                        t1=$(date +%s%N)
                        ms=$(( (t1 - t0) / 1000000 ))
                        check_scrape "$m" "256 tenants, 1000 sessions"
                        echo "scrape with 256 tenants and 1000 sessions: $ms ms, $(wc -c <"$m") bytes, $(grep -vc '^#' "$m") series"
                        [ "$ms" -lt 2000 ] && pass "scrape cost bounded: $ms ms (< 2000)" || fail "scrape took $ms ms"
                        [ "$(value "$m" npud_sessions)" -ge 1000 ] && pass "npud_sessions counts the 1000" \
                                || fail "npud_sessions '$(value "$m" npud_sessions)'"
                        # t0 has sessions 0, 255, 510, 765: 4 x 4 KiB (a granule may round up)
                        v=$(value "$m" 'npud_tenant_memory_used_bytes{tenant="t0"}')
                        [ -n "$v" ] && [ "$v" -ge 16384 ] && pass "tenant t0 memory used $v" || fail "t0 memory used '$v'"
                        [ "$(value "$m" 'npud_tenant_sessions{tenant="t0"}')" = 4 ] && pass "tenant t0 has 4 sessions" \
                                || fail "t0 sessions '$(value "$m" 'npud_tenant_sessions{tenant="t0"}')'"
                        [ "$(value "$m" 'npud_tenant_memory_quota_bytes{tenant="t1"}')" = 2097152 ] \
                                && pass "tenant t1 quota 2 MiB" || fail "t1 quota '$(value "$m" 'npud_tenant_memory_quota_bytes{tenant="t1"}')'"
                        [ -z "$(value "$m" 'npud_tenant_memory_quota_bytes{tenant="t254"}')" ] \
                                && pass "no quota series for an unlimited tenant" || fail "t254 has a quota series"
                        [ "$(grep -c '^npud_tenant_memory_used_bytes{' "$m")" = 256 ] && pass "256 tenant memory series" \
                                || fail "$(grep -c '^npud_tenant_memory_used_bytes{' "$m") tenant memory series"
                        [ "$(value "$m" 'npud_device_faults_total{device="0",kind="fail-next"}')" = 1 ] \
                                && [ "$(value "$m" 'npud_device_faults_total{device="1",kind="fail-next"}')" = 0 ] \
                                && pass "faults by kind and device" || fail "npud_device_faults_total: $(grep '^npud_device_faults_total' "$m" | head -3)"
                        [ "$(value "$m" 'npud_device_resets_total{device="1"}')" = 1 ] \
                                && [ "$(value "$m" 'npud_device_resets_total{device="0"}')" = 0 ] \
                                && pass "resets by device" || fail "npud_device_resets_total: $(grep '^npud_device_resets' "$m")"
                        v=$(value "$m" 'npud_task_errors_total{device="0",kind="device"}')
                        [ -n "$v" ] && [ "$v" -ge 1 ] && pass "task errors by kind: device $v" \
                                || fail "npud_task_errors_total: $(grep '^npud_task_errors' "$m")"
                        for f in npud_device_info npud_engine_utilization_ratio npud_tenant_memory_used_bytes; do
                                [ "$(grep -c "^# TYPE $f " "$m")" = 1 ] || fail "family $f declared $(grep -c "^# TYPE $f " "$m") times"
                        done
                else
                        fail "npuctl-crowd: $(cat "$dir/crowd.out")"
                fi
                exec 7>&-
                wait $cpid
                stop_npud "crowd"
        else
                fail "npud with 256 tenants did not come up"; cat "$dir/npud.log"
        fi
else
        fail "$crowd is missing (make $crowd)"
fi

[ $fails = 0 ] && echo "metrics: all checks passed" || echo "metrics: $fails check(s) failed"
[ $fails = 0 ]
