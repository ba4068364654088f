#!/bin/sh
# npusim smoke test: on a generated "mixed" trace the simulator is deterministic (two runs,
# and a replay of the saved trace, print the same), the latency-critical p99 under the
# dispatch policy is far below first-come-first-served, the normal tenants' engine time
# follows their weights 3:1 within 10 %, best-effort keeps its minimum share; malformed
# traces and bad options exit 2 with an error naming the field.
set -u
build=${1:-build}
npusim=$build/bin/npusim
dir=$(mktemp -d /tmp/npusim-test-XXXXXX)
fails=0
trap 'rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

gen="--generate mixed --seed 3 --duration-ms 1000"

# (a) determinism
# shellcheck disable=SC2086
"$npusim" $gen --json --save-trace "$dir/trace.json" >"$dir/run1.json" 2>"$dir/err" ||
        { fail "npusim $gen exited $?"; cat "$dir/err"; }
# shellcheck disable=SC2086
"$npusim" $gen --json >"$dir/run2.json" 2>&1 || fail "second run exited $?"
if cmp -s "$dir/run1.json" "$dir/run2.json"; then pass "two runs are identical"; else
        fail "two runs of the same trace differ"; fi
# shellcheck disable=SC2086
if "$npusim" $gen >"$dir/text1" && "$npusim" $gen >"$dir/text2" &&
   cmp -s "$dir/text1" "$dir/text2"; then pass "text output is identical too"; else
        fail "text output differs between runs"; fi
"$npusim" --json "$dir/trace.json" >"$dir/replay.json" 2>&1 || fail "replay exited $?"

# (b), (c) and the rest, from the JSON
python3 - "$dir/run1.json" "$dir/replay.json" <<'EOF' || fails=$((fails + 1))
import json, sys

run, replay = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        bad.append(what)

check(run["runs"] == replay["runs"] and run["comparison"] == replay["comparison"],
      "the saved trace replays to the same results")
fair, fifo = run["runs"]["fair"], run["runs"]["fifo"]
lc = run["comparison"]["latency-critical"]
check(lc["policy_p99_us"] * 20 < lc["fifo_p99_us"],
      "latency-critical p99 %.3f ms under the policy, %.1f ms under fifo"
      % (lc["policy_p99_us"] / 1e3, lc["fifo_p99_us"] / 1e3))
check(lc["policy_p99_us"] < 5000, "latency-critical p99 under the policy is below 5 ms")

t = {x["name"]: x for x in fair["tenants"]}
a, b = t["train-a"], t["train-b"]
check(a["weight"] == 3 and b["weight"] == 1, "normal tenants have weights 3 and 1")
ratio = a["engine_us_window"] / b["engine_us_window"]
check(2.7 <= ratio <= 3.3, "normal engine time ratio %.3f (weights 3:1, within 10 %%)" % ratio)
check(abs(a["class_share"] - a["configured_class_share"]) <= 0.075,
      "train-a in-class share %.3f vs configured %.3f"
      % (a["class_share"], a["configured_class_share"]))
be = t["batch"]
check(be["share"] >= 0.045, "best-effort share %.3f with min share 0.05" % be["share"])
check(t["inference"]["deadline_missed"] <= t["inference"]["tasks"] // 100,
      "latency-critical misses %d of %d deadlines under the policy"
      % (t["inference"]["deadline_missed"], t["inference"]["tasks"]))
for r, name in ((fair, "fair"), (fifo, "fifo")):
    check(sum(x["tasks"] for x in r["tenants"]) == run["trace"]["tasks"],
          "%s run completes every task" % name)
sys.exit(1 if bad else 0)
EOF

# (d) malformed traces: exit 2, the error names the field
expect_error() { # description field json
        printf '%s\n' "$3" >"$dir/bad.json"
        "$npusim" "$dir/bad.json" >"$dir/out" 2>"$dir/err"
        rc=$?
        if [ "$rc" != 2 ]; then fail "$1: exit $rc, expected 2"; cat "$dir/err"; return; fi
        if grep -qF -- "$2" "$dir/err"; then pass "$1: $(cat "$dir/err")"; else
                fail "$1: error does not name $2: $(cat "$dir/err")"; fi
}
ok='"device": {"cube": 2}, "tenants": [{"name": "a"}], "streams": [{"tenant": "a"}]'
expect_error "bad class" "tenants[0].class" \
        '{"device": {"cube": 2}, "tenants": [{"name": "a", "class": "urgent"}], "streams": [{"tenant": "a"}], "tasks": []}'
expect_error "bad cost" "tasks[1].cost_us.cube" \
        "{$ok, \"tasks\": [{\"t_us\": 0, \"stream\": 0, \"cost_us\": {\"cube\": 5}}, {\"t_us\": 1, \"stream\": 0, \"cost_us\": {\"cube\": -5}}]}"
expect_error "unknown engine" "tasks[0].cost_us.tpu" \
        "{$ok, \"tasks\": [{\"t_us\": 0, \"stream\": 0, \"cost_us\": {\"tpu\": 5}}]}"
expect_error "stream out of range" "tasks[0].stream" \
        "{$ok, \"tasks\": [{\"t_us\": 0, \"stream\": 3, \"cost_us\": {\"cube\": 5}}]}"
expect_error "missing arrival" "tasks[0].t_us" \
        "{$ok, \"tasks\": [{\"stream\": 0, \"cost_us\": {\"cube\": 5}}]}"
expect_error "unknown tenant" "streams[0].tenant" \
        '{"device": {"cube": 2}, "tenants": [{"name": "a"}], "streams": [{"tenant": "b"}], "tasks": []}'
expect_error "bad device" "device.cube" \
        '{"device": {"cube": -1}, "tenants": [{"name": "a"}], "streams": [{"tenant": "a"}], "tasks": []}'
expect_error "bad tile" "tile_us" "{$ok, \"tile_us\": 1, \"tasks\": []}"
expect_error "unknown key" "colour" "{$ok, \"colour\": 1, \"tasks\": []}"
expect_error "not JSON" "bad.json:2:" '{"device": '
"$npusim" --generate nosuch >/dev/null 2>"$dir/err"; rc=$?
if [ "$rc" = 2 ] && grep -q nosuch "$dir/err"; then pass "unknown generator exits 2"; else
        fail "unknown generator: exit $rc"; fi
"$npusim" --generate mixed --policy lottery >/dev/null 2>"$dir/err"; rc=$?
if [ "$rc" = 2 ] && grep -q -- --policy "$dir/err"; then pass "bad --policy exits 2"; else
        fail "bad --policy: exit $rc"; fi

if [ "$fails" -ne 0 ]; then echo "test-npusim: $fails failure(s)"; exit 1; fi
echo "test-npusim: all passed"
