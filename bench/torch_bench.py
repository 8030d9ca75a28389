#!/usr/bin/env python3
# Named torch_bench.py, not torch.py: a script named torch.py run from bench/ would import itself as `torch`
# (the first GPU run of this bench failed so: "module 'torch' has no attribute 'cuda'").
"""`bench torch`: one training loop — torchvision ResNet-18, batch 256, bf16 autocast, channels-last,
SGD — fed by (a) PyTorch's DataLoader at its best num_workers, (b) an expert loop (the data resident
on the GPU, index_select by a device randperm), (c) Stoker through stoker.torch (CUDA IPC); plus a
model-free run of each (just taking batches). CIFAR-shaped data: uint8 [N, 3, 32, 32], int64 labels;
every loader hands the loop uint8 images on the GPU, the loop normalizes them there.

Repeatable: the loops run interleaved in --rounds rounds (ceiling → resident → each Stoker route of
--routes), each --steps timed steps; the table gives per loop the median over rounds, the spread
((max − min) ÷ median) and the median of its ratios to the resident loop *of the same round* (the
GPU's clocks and the host's load moved single loops 20–30 % between runs). PyTorch's DataLoader runs
once per --workers value (the best is reported). Figures: images/s of the timed steps (after warm-up,
synchronized), and the GPU's data wait as 1 − images/s ÷ images/s of the same round's loop over one
batch already on the GPU (the ceiling: a loader can only lose time against it).
Usage: python3 bench/torch_bench.py [--rounds 3] [--steps 300] [--routes batch] [--json out.json]. Needs CUDA, but for
`--device cpu`: the model-free run only, (b) in host memory against (c) over shared memory (no GPU), and (a)
with `pin_memory` off. The model-free table gives batches/s too, and ends with the ratios of the leased
routes: the default (`recycle="auto"`, kept batches stay correct) against the zero-copy opt-in
(`recycle="next"`) and against torch's DataLoader at its best, measured in the same rounds.
Model-free runs also report the client's own CPU time per batch (process time ÷ batches: what the
consumer pays for taking a batch, the socket wait excluded). `--server-timing` makes the loader log
where its time per batch goes at each epoch's end (STOKER_SERVE_TIMING; on stderr).
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


# Stoker routes by name: extra stoker.torch.DataLoader options. "gather" (the default): the client gathers
# each batch itself from the loader's resident columns, mapped once (NOTE [Client gather], src/serve/session.ts);
# "batch": the loader gathers each batch into a slot (its own CUDA context) and hands the slot over, which
# goes back once the loop no longer refers to the batch (recycle="auto", the default: NOTE [Kept batches],
# python/stoker/torch.py); "batch-next": the same, the slot back when the next batch is asked for (the
# zero-copy opt-in, recycle="next"); "batch-keep": "batch" with a loop that keeps every batch of its epoch
# (`list(loader)`), so that all but the first few are copied out of their slots.
ROUTES = {"gather": {"gather": True}, "batch": {"gather": False}, "batch-next": {"gather": False, "recycle": "next"},
          "batch-keep": {"gather": False}}
KEEPS = {"batch-keep"}
_server_loader = None  # the Stoker loader whose process CPU the current timed() run reads


def log(msg):
    print(f"bench torch: {msg}", file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=50_000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=300, help="timed training steps of each loop in each round")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each runs every loop once, in turn")
    p.add_argument("--routes", default=",".join(ROUTES), help=f"Stoker routes to run, comma-separated: {', '.join(ROUTES)}")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--workers", default="2,4,8")
    p.add_argument("--json")
    p.add_argument("--no-model", action="store_true")
    p.add_argument("--device", default="cuda", help="cuda (everything) or cpu (model-free over shared memory only)")
    p.add_argument("--slots", type=int, default=4, help="batches the Stoker loader may run ahead (stoker.torch slots=)")
    p.add_argument("--epochs", type=int, default=2, help="epochs of each model-free run (in each round)")
    p.add_argument("--server-timing", action="store_true")
    a = p.parse_args()
    global _server_loader
    import torch
    on_gpu = a.device.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return
    if not on_gpu:
        a.no_model = True
    import stoker.torch as st
    dev = torch.device(a.device)

    def sync():
        if on_gpu:
            torch.cuda.synchronize()
    N, B = a.samples, a.batch
    torch.manual_seed(0)
    # The synthetic source's content, so (c) reads the same bytes as (a) and (b).
    j = torch.arange(3 * 32 * 32)
    images = ((torch.arange(N).view(-1, 1) + j.view(1, -1)) % 251).to(torch.uint8).view(N, 3, 32, 32)
    labels = (torch.arange(N) % 10).to(torch.int64)
    results = {"samples": N, "batch": B, "gpu": torch.cuda.get_device_name(0) if on_gpu else f"none (CPU, {os.cpu_count()} cores)",
               "torch": torch.__version__, "device": a.device}

    model = opt = None
    if not a.no_model:
        try:
            import torchvision
            model = torchvision.models.resnet18(num_classes=10).to(dev).to(memory_format=torch.channels_last)
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        except ImportError:
            log("torchvision missing: model-free figures only")
    cpu_per_batch = {}
    mean = torch.tensor([0.49, 0.48, 0.45], device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.25, 0.24, 0.26], device=dev).view(1, 3, 1, 1) * 255
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        x = ((x.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def server_cpu(sl):
        """CPU seconds of the Stoker loader process so far (all its threads; Linux), or None."""
        try:
            f = open(f"/proc/{sl._proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, AttributeError, IndexError, ValueError):
            return None

    server_per_batch = {}

    def timed(batches, with_model, steps, name=None):
        """images/s over `steps` steps after `warmup` ones; `batches` yields (x_uint8, y) on `dev`."""
        it = iter(batches)
        try:
            return run(it, with_model, steps, name)
        finally:
            it.close()  # an abandoned Stoker epoch is stopped now, not when it is collected

    def run(it, with_model, steps, name):
        for _ in range(a.warmup):
            x, y = next(it)
            if with_model:
                step(x, y)
        sync()
        t = time.perf_counter()
        c = time.process_time()
        s0 = server_cpu(_server_loader) if _server_loader is not None else None
        for _ in range(steps):
            x, y = next(it)
            if with_model:
                step(x, y)
            else:
                x.view(-1)[:64].sum()  # read it on the stream, as a step would
        sync()
        if name is not None:
            cpu_per_batch.setdefault(name, []).append((time.process_time() - c) / steps * 1e6)
        if s0 is not None:
            server_per_batch.setdefault(name, []).append((server_cpu(_server_loader) - s0) / steps * 1e6)
        return steps * B / (time.perf_counter() - t)

    def forever(make_epoch):
        e = 0
        while True:
            yield from make_epoch(e)
            e += 1

    # The ceiling: one batch already on the GPU, reused.
    x0, y0 = images[:B].to(dev), labels[:B].to(dev)
    model_free_steps = a.epochs * (N // B)
    if model is not None:
        # Warm-up, not counted: cuDNN's algorithm choice and the clocks settle here.
        log(f"ceiling (warm-up) {timed(forever(lambda e: ((x0, y0) for _ in range(N // B))), True, a.steps):.0f} images/s")

    # (b) resident on the GPU, index_select by a device randperm.
    gx, gy = images.to(dev), labels.to(dev)

    def resident(e):
        g = torch.Generator(device=dev)
        g.manual_seed(e)
        perm = torch.randperm(N, device=dev, generator=g)
        for i in range(N // B):
            idx = perm[i * B:(i + 1) * B]
            yield gx.index_select(0, idx), gy.index_select(0, idx)

    # (a) torch DataLoader, pinned, per-item dataset as users write it.
    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return images[i], labels[i]

    def torch_loader(workers):
        dl = torch.utils.data.DataLoader(DS(), batch_size=B, shuffle=True, drop_last=True, pin_memory=on_gpu,
                                         num_workers=workers, persistent_workers=workers > 0)

        def epoch(e):
            for x, y in dl:
                yield x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        return epoch

    # (c) Stoker through the client: one loader process per route (--routes), each kept open across rounds.
    env = dict(os.environ, STOKER_SERVE_TIMING="1") if a.server_timing else None
    routes = [r for r in a.routes.split(",") if r]
    for r in routes:
        if r not in ROUTES:
            p.error(f"--routes: unknown route {r!r}; known: {', '.join(ROUTES)}")
    # Labels as int64, as the resident loop holds them (and as PyTorch's losses want them).
    loaders = {r: st.DataLoader(source=st.synthetic(n=N), batch_size=B, device=a.device, shuffle=True, drop_last=True, seed=1, env=env,
                                dtypes={"label": torch.int64}, **dict(ROUTES[r], slots=a.slots)) for r in routes}

    def stoker_epoch(sl, keep=False):
        def epoch(e):
            kept = []
            for b in sl:
                if keep:
                    kept.append(b)
                yield b["image"], b["label"]
        return epoch
    # Interleaved rounds: the GPU's clocks and the host's load drift between runs by 20–30 %, so every
    # loop runs once a round, and each ratio is taken against the resident loop of its own round.
    loops = [("resident", resident)] + [(f"stoker:{r}", stoker_epoch(loaders[r], r in KEEPS)) for r in routes]
    # (a) model-free: torch's DataLoader on the same data, once per --workers value in every round.
    workers = [int(x) for x in a.workers.split(",") if x]
    free_loops = loops + [(f"torch nw={w}", torch_loader(w)) for w in workers]
    per_round = {"modelFree": [], "train": []}
    for rnd in range(a.rounds):
        row = {}
        for name, fn in free_loops:
            _server_loader = loaders.get(name.split(":", 1)[1]) if name.startswith("stoker:") else None
            row[name] = timed(forever(fn), False, model_free_steps, name)
            log(f"round {rnd + 1} model-free {name}: {row[name]:.0f} samples/s, client CPU {cpu_per_batch[name][-1]:.1f} µs a batch")
        per_round["modelFree"].append(row)
    if model is not None:
        best = (0.0, None)
        for w in [int(x) for x in a.workers.split(",") if x]:
            ips = timed(forever(torch_loader(w)), True, a.steps)
            log(f"torch DataLoader num_workers={w}: {ips:.0f} images/s")
            if ips > best[0]:
                best = (ips, w)
        results["torchDataLoader"] = {"imagesPerSec": best[0], "numWorkers": best[1]}
        for rnd in range(a.rounds):
            row = {"ceiling": timed(forever(lambda e: ((x0, y0) for _ in range(N // B))), True, a.steps)}
            for name, fn in loops:
                _server_loader = None
                row[name] = timed(forever(fn), True, a.steps)
            log(f"round {rnd + 1} train: " + ", ".join(f"{k} {v:.0f}" for k, v in row.items()))
            per_round["train"].append(row)
    _server_loader = None
    for sl in loaders.values():
        sl.close()

    def summary(rows):
        """Per loop: the median over rounds, the spread (max − min) ÷ median, and the median of the
        ratios to the resident loop of the same round."""
        out = {}
        for name in rows[0]:
            v = [r[name] for r in rows]
            ratio = [r[name] / r["resident"] for r in rows]
            out[name] = {"median": statistics.median(v), "spread": (max(v) - min(v)) / statistics.median(v),
                         "rounds": v, "vsResident": statistics.median(ratio), "vsResidentRange": [min(ratio), max(ratio)]}
        return out
    results["modelFree"] = summary(per_round["modelFree"])
    results["clientCpuUsPerBatch"] = {k: statistics.median(v) for k, v in cpu_per_batch.items()}
    results["serverCpuUsPerBatch"] = {k: statistics.median(v) for k, v in server_per_batch.items()}
    if model is not None:
        results["train"] = summary(per_round["train"])
        ceiling = results["train"]["ceiling"]["median"]
        for name, r in results["train"].items():
            # Data wait: 1 − images/s ÷ the ceiling of the same round (median over rounds).
            r["dataWait"] = max(0.0, statistics.median(
                [1 - row[name] / row["ceiling"] for row in per_round["train"]]))
        results["torchDataLoader"]["dataWait"] = max(0.0, 1 - results["torchDataLoader"]["imagesPerSec"] / ceiling)

    print(f"GPU {results['gpu']}, torch {results['torch']}, N={N}, batch {B}, {a.rounds} rounds, "
          f"{a.steps} train steps / {model_free_steps} model-free batches a loop a round")
    if model is not None:
        print(f"{'train loop':<26}{'images/s':>12}{'spread':>9}{'data wait':>11}{'÷ resident':>12}  (medians over rounds; ratio range)")
        for name, r in results["train"].items():
            lo, hi = r["vsResidentRange"]
            print(f"{name:<26}{r['median']:>12.0f}{100 * r['spread']:>8.1f}%{100 * r['dataWait']:>10.2f}%"
                  f"{r['vsResident']:>12.3f}  [{lo:.3f}, {hi:.3f}]")
        t = results["torchDataLoader"]
        print(f"{'torch nw=' + str(t['numWorkers']):<26}{t['imagesPerSec']:>12.0f}{'(once)':>9}{100 * t['dataWait']:>10.2f}%")
    print(f"{'model-free loop':<26}{'samples/s':>12}{'batches/s':>11}{'spread':>9}{'÷ resident':>12}{'client µs':>11}{'loader µs':>11}")
    for name, r in results["modelFree"].items():
        srv = results["serverCpuUsPerBatch"].get(name)
        print(f"{name:<26}{r['median']:>12.0f}{r['median'] / B:>11.0f}{100 * r['spread']:>8.1f}%{r['vsResident']:>12.3f}"
              f"{results['clientCpuUsPerBatch'][name]:>11.1f}{'' if srv is None else f'{srv:>11.1f}'}")
    # The leased routes against each other and against torch's DataLoader, round by round (medians, ranges).
    rows = per_round["modelFree"]
    torch_names = [n for n in rows[0] if n.startswith("torch ")]
    best_torch = max(torch_names, key=lambda n: results["modelFree"][n]["median"]) if torch_names else None
    pairs = [("stoker:batch", "stoker:batch-next"), ("stoker:batch-keep", "stoker:batch-next"),
             ("stoker:batch", best_torch), ("stoker:batch-keep", best_torch), ("stoker:batch-next", best_torch)]
    results["ratios"] = {}
    for num, den in pairs:
        if den is None or num not in rows[0] or den not in rows[0]:
            continue
        q = [r[num] / r[den] for r in rows]
        results["ratios"][f"{num} / {den}"] = {"median": statistics.median(q), "range": [min(q), max(q)]}
        print(f"{num + ' ÷ ' + den:<48}{statistics.median(q):>8.3f}  [{min(q):.3f}, {max(q):.3f}]  (batches/s, same rounds)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)

if __name__ == "__main__":
    main()
