#!/usr/bin/env python3
"""Where the client gather's time goes (issue 16; H200 run 14 measured 680–1 025 µs of client CPU a
batch model-free against 79 µs for the resident loop). Model-free loop over the client-gather route:
wall and process time per batch, (1) as is, (2) with the loader's IPC columns cloned into this
process's own memory (is reading IPC memory slow?), (3) cProfile's top functions of one run.
Usage: python3 bench/torch_client_profile.py [--device cuda] [--epochs 4]"""
import argparse, cProfile, io, os, pstats, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch
import stoker.torch as st

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda")
p.add_argument("--epochs", type=int, default=4)
a = p.parse_args()
sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)


def threads():
    """CPU seconds of each thread of this process, by thread id: (name, seconds)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            comm = open(f"/proc/self/task/{tid}/comm").read().strip()
            f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
            out[tid] = (comm, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
        except (OSError, IndexError, ValueError):
            pass
    return out


def busy(before, after, n):
    """The threads that burned CPU between two `threads()` snapshots, µs a batch, busiest first."""
    rows = sorted(((after[t][1] - before.get(t, ("", 0.0))[1], after[t][0], t) for t in after), reverse=True)
    return ", ".join(f"{name}[{tid}] {d / n * 1e6:.0f}" for d, name, tid in rows[:6] if d > 0)


def loop(l, epochs):
    n = 0
    sync()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(epochs):
        for b in l:
            b["image"].view(-1)[:64].sum()
            b["label"].to(torch.int64)  # a no-op: the loader gives int64 labels (dtypes)
            n += 1
    sync()
    return (time.perf_counter() - t) / n * 1e6, (time.process_time() - c) / n * 1e6, n


with st.DataLoader(source=st.synthetic(n=50_000), batch_size=256, device=a.device, shuffle=True, drop_last=True, seed=1, dtypes={"label": torch.int64}) as l:
    print("gathers", l.gathers, "chunk", l._chunk, flush=True)
    loop(l, 1)
    for what in ("ipc columns", "ipc columns again"):
        t0 = threads()
        w, c, n = loop(l, a.epochs)
        print(f"{what}: {w:.1f} µs wall, {c:.1f} µs CPU a batch ({n} batches; {256e6 / w / 1e6:.2f} M samples/s)", flush=True)
        print(f"  threads (µs a batch): {busy(t0, threads(), n)}", flush=True)
    ipc = l._store
    l._store = {k: v.clone() for k, v in ipc.items()}
    loop(l, 1)
    t0 = threads()
    w, c, n = loop(l, a.epochs)
    print(f"  threads (µs a batch): {busy(t0, threads(), n)}", flush=True)
    print(f"own-memory columns: {w:.1f} µs wall, {c:.1f} µs CPU a batch ({256e6 / w / 1e6:.2f} M samples/s)", flush=True)
    l._store = ipc
    # The reference: the same columns, an expert's per-batch index_select by a device randperm.
    cols = {k: v.clone() for k, v in ipc.items()}
    rows = next(iter(cols.values())).shape[0]

    class Resident:
        def __iter__(self):
            perm = torch.randperm(rows, device=a.device)
            for i in range(rows // 256):
                idx = perm[i * 256:(i + 1) * 256]
                yield {k: v.index_select(0, idx) for k, v in cols.items()}
    loop(Resident(), 1)
    t0 = threads()
    w, c, n = loop(Resident(), a.epochs)
    print(f"resident reference: {w:.1f} µs wall, {c:.1f} µs CPU a batch ({256e6 / w / 1e6:.2f} M samples/s)", flush=True)
    print(f"  threads (µs a batch): {busy(t0, threads(), n)}", flush=True)
    torch.set_num_threads(1)
    t0 = threads()
    w, c, n = loop(l, a.epochs)
    print(f"ipc columns, torch.set_num_threads(1): {w:.1f} µs wall, {c:.1f} µs CPU a batch ({256e6 / w / 1e6:.2f} M samples/s)", flush=True)
    print(f"  threads (µs a batch): {busy(t0, threads(), n)}", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    loop(l, a.epochs)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
    print(s.getvalue()[-3500:], flush=True)
