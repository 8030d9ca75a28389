#!/usr/bin/env python3
"""How far this host lets identical, independent work scale with cores (issue 17's scaling goal).

No loader here: N processes, each pinned to its own CPU (or left to the scheduler), run the same
fixed work at once; the row's scaling is N x (one process's time alone) / (the slowest one's time).
Works:
  spin  a pure-Python integer loop: almost no memory, no SIMD (the frequency and the vCPU itself);
  l2    numpy arithmetic on a 256 KiB array again and again: SIMD in the core's own cache;
  mem   numpy copies of 64 MiB arrays: memory bandwidth;
  jpeg  PIL decodes JPEG files from memory and resizes to 224 (libjpeg-turbo's SIMD + Pillow's resample):
        the kind of work a decode process does.
Also: each CPU alone on `jpeg` (do the vCPUs run at one speed?), CPU 0 beside each other CPU (which
CPUs share a core?), the steal time of /proc/stat during each row (the hypervisor giving the vCPU to
someone else), and, where perf_event_open is allowed, cycles and instructions per unit of work
(does the work take more cycles under load, or the same cycles at a lower clock?).

  python3 bench/host_scaling.py --dir /tmp/stoker-bench-images-4000-100 [--ns 1,2,4,8,12,16] [--works spin,l2,mem,jpeg]
    [--units 30] [--rows alone,pairs,pinned,unpinned]
"""
import argparse
import ctypes
import io
import json
import multiprocessing as mp
import os
import struct
import sys
import time

# ---- perf_event_open through ctypes (x86-64 syscall 298); None where the kernel or the VM refuses it.
_libc = ctypes.CDLL(None, use_errno=True)
_PERF_OPEN = 298
_HW, _SW = 0, 1
_CYCLES, _INSTRUCTIONS, _LLC_MISSES = 0, 1, 3
_TASK_CLOCK = 1


def _perf_open(kind, config):
    # struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): type, size, config, sample_period,
    # sample_type, read_format, flags (bit 5 exclude_kernel, bit 6 exclude_hv), wakeup_events, bp_type, config1.
    attr = struct.pack('IIQQQQQIIQ', kind, 64, config, 0, 0, 0, (1 << 5) | (1 << 6), 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, 64)
    fd = _libc.syscall(_PERF_OPEN, buf, 0, -1, -1, 0)
    return fd if fd >= 0 else None


class Counters:
    """cycles, instructions, LLC misses and task clock of this thread, read as deltas."""

    def __init__(self):
        self.fds = {name: _perf_open(kind, cfg) for name, kind, cfg in (
            ('cycles', _HW, _CYCLES), ('instructions', _HW, _INSTRUCTIONS), ('llc_misses', _HW, _LLC_MISSES), ('task_ns', _SW, _TASK_CLOCK))}

    def read(self):
        out = {}
        for name, fd in self.fds.items():
            if fd is not None:
                out[name] = struct.unpack('Q', os.read(fd, 8))[0]
        return out


def perf_note():
    try:
        paranoid = open('/proc/sys/kernel/perf_event_paranoid').read().strip()
    except OSError:
        paranoid = '?'
    c = Counters()
    got = [k for k, v in c.fds.items() if v is not None]
    err = os.strerror(ctypes.get_errno()) if len(got) < 4 else ''
    return f'perf_event_paranoid {paranoid}; counters open: {", ".join(got) or "none"}{" (" + err + ")" if err else ""}'


# ---- the works: each a function of a repeat count, the same in every process.
_jpegs = []


def load_jpegs(directory, count=48):
    files = []
    for root, _, names in sorted(os.walk(directory)):
        for n in sorted(names):
            if n.lower().endswith(('.jpg', '.jpeg')):
                files.append(os.path.join(root, n))
                if len(files) >= count:
                    break
        if len(files) >= count:
            break
    for f in files:
        with open(f, 'rb') as fh:
            _jpegs.append(fh.read())


def work_spin(units):
    x = 0
    for i in range(units * 1_000_000):
        x = (x + i * 7) & 0xFFFF
    return x


def work_l2(units):
    import numpy as np
    a = np.arange(32768, dtype=np.float64)  # 256 KiB
    b = np.empty_like(a)
    for _ in range(units * 2_000):
        np.multiply(a, 1.0001, out=b)
        np.add(b, 0.5, out=a)
    return float(a[0])


def work_mem(units):
    import numpy as np
    a = np.ones(8 * 1024 * 1024, dtype=np.float64)  # 64 MiB
    b = np.empty_like(a)
    for _ in range(units * 3):
        np.copyto(b, a)
        np.copyto(a, b)
    return float(a[0])


def work_jpeg(units):
    from PIL import Image
    for i in range(units * 12):
        im = Image.open(io.BytesIO(_jpegs[i % len(_jpegs)]))
        im = im.convert('RGB').resize((224, 224), Image.BILINEAR)
    return im.size[0]


WORKS = {'spin': work_spin, 'l2': work_l2, 'mem': work_mem, 'jpeg': work_jpeg}


def _child(work, units, cpu, ready, go, out):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    WORKS[work](1)  # warm: imports, caches, page faults
    c = Counters()
    ready.put(1)
    go.wait()
    c0, t0 = c.read(), time.perf_counter()
    WORKS[work](units)
    t1, c1 = time.perf_counter(), c.read()
    out.put({'cpu': cpu, 's': t1 - t0, **{k: c1[k] - c0[k] for k in c1}})


def steal_ticks():
    with open('/proc/stat') as f:
        fields = f.readline().split()[1:]
    # user nice system idle iowait irq softirq steal
    return int(fields[7]) if len(fields) > 7 else 0


def mhz():
    try:
        vals = [float(l.split(':')[1]) for l in open('/proc/cpuinfo') if l.startswith('cpu MHz')]
        return round(sum(vals) / len(vals)) if vals else None
    except OSError:
        return None


def run(work, units, cpus):
    """Processes on `cpus` (a list; None entries are unpinned) at once; returns per-process results."""
    ctx = mp.get_context('fork')
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_child, args=(work, units, c, ready, go, out)) for c in cpus]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    s0, m0 = steal_ticks(), time.perf_counter()
    go.set()
    mid = None
    res = []
    for k in range(len(procs)):
        res.append(out.get())
        if mid is None:
            mid = mhz()
    wall = time.perf_counter() - m0
    steal = (steal_ticks() - s0) / os.sysconf('SC_CLK_TCK')
    for p in procs:
        p.join()
    return res, wall, steal, mid


def summary(res):
    s = sorted(r['s'] for r in res)
    row = {'min_s': round(s[0], 3), 'median_s': round(s[len(s) // 2], 3), 'max_s': round(s[-1], 3)}
    if all('cycles' in r and 'instructions' in r for r in res):
        cyc = sum(r['cycles'] for r in res)
        ins = sum(r['instructions'] for r in res)
        row['gcycles_per_proc'] = round(cyc / len(res) / 1e9, 3)
        row['ipc'] = round(ins / cyc, 2) if cyc else None
        if all('task_ns' in r for r in res):
            row['ghz'] = round(cyc / sum(r['task_ns'] for r in res), 2)
        if all('llc_misses' in r for r in res):
            row['llc_miss_per_kinst'] = round(1000 * sum(r['llc_misses'] for r in res) / ins, 3) if ins else None
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dir', required=True, help='a folder of JPEG files (the fixture of bench images)')
    ap.add_argument('--ns', default='1,2,4,8,12,16')
    ap.add_argument('--works', default='spin,l2,mem,jpeg')
    ap.add_argument('--units', type=int, default=30, help='work per process: ~1 s of each work on one core of a 2.6 GHz Xeon')
    ap.add_argument('--rows', default='alone,pairs,pinned,unpinned', help='which tests: alone, pairs (the topology) and the scaling rows pinned and/or unpinned')
    a = ap.parse_args()
    load_jpegs(a.dir)
    if not _jpegs:
        sys.exit(f'--dir {a.dir}: no .jpg files there; give the folder bench images generated')
    cpus = sorted(os.sched_getaffinity(0))
    print(f'host_scaling: {len(cpus)} CPUs {cpus[0]}..{cpus[-1]}, {perf_note()}, {len(_jpegs)} JPEGs', flush=True)

    rows = set(a.rows.split(','))
    # Each CPU alone, on the decode-like work: do the vCPUs run at one speed?
    alone = {}
    for c in cpus if rows & {'alone', 'pairs'} else []:
        res, _, steal, _ = run('jpeg', a.units, [c])
        alone[c] = round(res[0]['s'], 3)
    if alone:
        print(json.dumps({'test': 'alone', 'work': 'jpeg', 's_by_cpu': alone, 'spread': round(max(alone.values()) / min(alone.values()), 2)}), flush=True)

    # CPU 0 beside each other CPU: a CPU that slows CPU 0 down shares its core (or its neighbour's).
    pair = {}
    for c in cpus[1:] if 'pairs' in rows else []:
        res, _, _, _ = run('jpeg', a.units, [cpus[0], c])
        pair[c] = round(max(r['s'] for r in res) / alone[cpus[0]], 2)
    if pair:
        print(json.dumps({'test': 'pairs with cpu0', 'work': 'jpeg', 'slowdown_by_cpu': pair}), flush=True)

    ns = [int(x) for x in a.ns.split(',') if int(x) <= len(cpus)]
    for work in a.works.split(','):
        one = None
        for n in ns:
            for pinned in (True, False):
                if (n == 1 and not pinned) or (n > 1 and ('pinned' if pinned else 'unpinned') not in rows):
                    continue
                res, wall, steal, m = run(work, a.units, cpus[:n] if pinned else [None] * n)
                row = summary(res)
                if n == 1:
                    one = row['max_s']
                row.update({'test': 'scaling', 'work': work, 'n': n, 'pinned': pinned, 'wall_s': round(wall, 3),
                            'scaling': round(one / row['max_s'], 3) if one else None,
                            'steal_cpu_s': round(steal, 3), 'cpu_mhz': m})
                print(json.dumps(row), flush=True)


if __name__ == '__main__':
    main()
