#!/usr/bin/env python3
"""What delayed the latency-critical requests of npubench's isolation section.

Reads a scheduler trace taken while the section ran and the requests npubench printed as
slow, and says for each slow request what happened on the way: how long the loop thread took
to run after the client's request woke it (and whether that wake-up crossed CPUs), how long
the loop thread then ran, and what else ran or woke the loop thread during the request.

  NPUBENCH_ISO_TRACE=0.03 NPUBENCH_ISO_ROUNDS=1 NPUBENCH_ISO_LOADS=resnet \\
    NPUBENCH_ISO_PLACES=same NPUBENCH_ONLY=isolation NPUD_BIN=build/bin/npud \\
    build/bin/npubench 2> bench.err &
  sleep 10.5; perf sched record -k CLOCK_MONOTONIC -o sched.data -- sleep 3
  perf sched script -i sched.data > sched.txt
  tools/iso-trace.py sched.txt bench.err --over 0.045

(the loaded phase of one round starts about 9 s in with 3000 requests; NPUBENCH_ISO_TRACE
prints when each phase starts). The trace must be on CLOCK_MONOTONIC, the clock npubench
prints its requests' start times on. The latency-critical client is the npubench thread that
woke npud's loop thread most often; the loop thread is the npud thread it woke.
"""
import argparse
import bisect
import collections
import re
import sys

EVENT = re.compile(r'^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(?:sched:)?(\w+):\s*(.*)$')
SLOW = re.compile(r'LC request at ([\d.]+) took ([\d.]+) ms')


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))]


def parse_trace(path):
    events = []
    with open(path) as f:
        for line in f:
            m = EVENT.match(line)
            if not m:
                continue
            comm, pid, cpu, t, kind, rest = m.groups()
            if kind not in ('sched_waking', 'sched_switch'):
                continue
            fields = dict(re.findall(r'(\w+)=(\S+)', rest))
            events.append((float(t), kind, comm, pid, int(cpu), fields))
    return events


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('trace', help='perf sched script output (CLOCK_MONOTONIC)')
    ap.add_argument('bench', help="npubench's stderr with NPUBENCH_ISO_TRACE lines")
    ap.add_argument('--over', type=float, default=0.045, help='slow: over this many ms (0.045)')
    a = ap.parse_args()

    ev = parse_trace(a.trace)
    if not ev:
        sys.exit('iso-trace: no sched_waking or sched_switch events in %s' % a.trace)
    wakes = collections.Counter()
    for t, kind, comm, pid, cpu, f in ev:
        if kind == 'sched_waking' and comm == 'npubench' and f.get('comm') == 'npud':
            wakes[(pid, f.get('pid'))] += 1
    if not wakes:
        sys.exit('iso-trace: no npubench thread woke an npud thread in the trace')
    (client, loop), _ = wakes.most_common(1)[0]
    times = [e[0] for e in ev]
    lo, hi = times[0], times[-1]

    slow = []
    with open(a.bench) as f:
        for line in f:
            m = SLOW.search(line)
            if m:
                t0, ms = float(m.group(1)), float(m.group(2))
                if lo < t0 and t0 + ms / 1e3 < hi and ms > a.over:
                    slow.append((t0, ms))
    print('iso-trace: trace %.3f-%.3f s; latency-critical client %s, loop thread %s; %d requests over %.3f ms'
          % (lo, hi, client, loop, len(slow), a.over))

    causes = collections.Counter()
    wake_us, run_us, crossed = [], [], 0
    for t0, ms in slow:
        i, j = bisect.bisect_left(times, t0), bisect.bisect_right(times, t0 + ms / 1e3)
        seen = set()
        woke_at = woke_cpu = ran_at = None
        for t, kind, comm, pid, cpu, f in ev[i:j]:
            if kind == 'sched_waking' and f.get('pid') == loop:
                if pid == client and woke_at is None:
                    woke_at, woke_cpu = t, cpu
                elif pid != client:
                    seen.add('the loop thread woken by %s' % re.sub(r'\d+$', '', comm))
            elif kind == 'sched_switch':
                nxt, npid = f.get('next_comm'), f.get('next_pid')
                if npid == loop and woke_at is not None and ran_at is None:
                    ran_at = t
                    if cpu != woke_cpu:
                        crossed += 1
                    wake_us.append((t - woke_at) * 1e6)
                elif f.get('prev_pid') == loop and ran_at is not None and len(run_us) < len(wake_us):
                    run_us.append((t - ran_at) * 1e6)
                if nxt == 'npubench' and npid != client:
                    seen.add('another npubench thread (a best-effort client) ran')
                elif nxt and not nxt.startswith(('npubench', 'npud', 'swapper')):
                    seen.add('another task ran: %s' % re.sub(r'/\d+$', '', nxt))
        for s in seen or ['none of these']:
            causes[s] += 1

    for s, n in causes.most_common():
        print('iso-trace: %5d  %s' % (n, s))
    if wake_us:
        print('iso-trace: the client\'s wake-up of the loop thread to its running: p50 %.1f us, p90 %.1f us '
              '(%d of %d across CPUs)' % (pct(wake_us, .5), pct(wake_us, .9), crossed, len(wake_us)))
    if run_us:
        print('iso-trace: the loop thread\'s run for the request: p50 %.1f us, p90 %.1f us'
              % (pct(run_us, .5), pct(run_us, .9)))


if __name__ == '__main__':
    main()
