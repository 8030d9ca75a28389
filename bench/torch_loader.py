#!/usr/bin/env python3
"""PyTorch's DataLoader on a CIFAR-shaped in-RAM dataset: the peer that bench/gpu.ts measures Stoker
against, run by it as a child process (`python3 bench/torch_loader.py --samples 200000 ...`).

What it measures, per num_workers value:
- A per-item map-style Dataset over a uint8 tensor [N, 3, 32, 32] and an int64 label tensor (the
  label is the sample id, so the last batch can be checked against the images it names), as a
  PyTorch user writes it: __getitem__(i) returns (images[i], labels[i]); default collate.
- DataLoader(batch_size, shuffle=True, pin_memory=True, num_workers=W, drop_last=True), seeded.
- Each batch: x.cuda(non_blocking=True), y.cuda(non_blocking=True). Nothing else.
- One iterator per W: `--warmup` batches (worker start-up included), torch.cuda.synchronize(), then
  `--batches` timed batches, torch.cuda.synchronize(); samples/s = timed samples / timed seconds.
  Both phases stay inside the first epoch (checked), so no epoch restart is timed.

Output: one JSON object on stdout (progress goes to stderr). When torch or CUDA is missing it prints
{"skipped": "<why>"} and exits 0, so the caller can report the reason; any other failure exits 1.
`--device cpu` runs the same loop without CUDA (pin_memory off, no copy): a smoke test only.
"""

import argparse
import json
import sys
import time


def log(msg):
    print(f"  torch: {msg}", file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--workers", default="0,4,8", help="comma-separated num_workers values")
    p.add_argument("--warmup", type=int, default=20, help="untimed batches per num_workers value")
    p.add_argument("--batches", type=int, default=200, help="timed batches per num_workers value")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args()
    workers = [int(w) for w in args.workers.split(",") if w.strip() != ""]
    if not workers or any(w < 0 for w in workers):
        p.error(f"--workers must list integers >= 0, got {args.workers!r}")
    per_epoch = args.samples // args.batch
    if args.warmup < 1 or args.batches < 1 or args.warmup + args.batches > per_epoch:
        p.error(f"--warmup ({args.warmup}) + --batches ({args.batches}) must be >= 2 and fit in one epoch ({per_epoch} batches)")

    try:
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, Dataset
    except Exception as e:  # ImportError, or a broken install
        print(json.dumps({"skipped": f"cannot import torch/numpy in {sys.executable}: {type(e).__name__}: {e}"}))
        return 0
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print(json.dumps({"skipped": f"torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False)"}))
        return 0

    class ArrayDataset(Dataset):
        """Per-item access to in-RAM arrays: what a hand-written PyTorch Dataset for CIFAR does."""

        def __init__(self, images, labels):
            self.images = images
            self.labels = labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return self.images[i], self.labels[i]

    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    images = torch.from_numpy(rng.integers(0, 256, size=(args.samples, 3, 32, 32), dtype=np.uint8))
    labels = torch.arange(args.samples, dtype=torch.int64)
    gen_s = time.perf_counter() - t0
    log(f"{args.samples} samples generated in {gen_s:.1f} s")
    dataset = ArrayDataset(images, labels)
    if cuda:
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # create the context before any timing
        torch.cuda.synchronize()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    results = []
    for w in workers:
        g = torch.Generator()
        g.manual_seed(args.seed)
        loader = DataLoader(
            dataset,
            batch_size=args.batch,
            shuffle=True,
            pin_memory=cuda,
            num_workers=w,
            drop_last=True,
            generator=g,
        )
        ts = time.perf_counter()
        it = iter(loader)
        for _ in range(args.warmup):
            x, y = next(it)
            if cuda:
                x = x.cuda(non_blocking=True)
                y = y.cuda(non_blocking=True)
        sync()
        t1 = time.perf_counter()
        for _ in range(args.batches):
            x, y = next(it)
            if cuda:
                x = x.cuda(non_blocking=True)
                y = y.cuda(non_blocking=True)
        sync()
        t2 = time.perf_counter()
        # The last batch must hold the images its labels (= sample ids) name.
        xc = x.cpu()
        yc = y.cpu()
        if tuple(xc.shape) != (args.batch, 3, 32, 32) or not torch.equal(xc, images[yc]):
            raise RuntimeError(f"num_workers={w}: the last batch does not hold the images its labels name")
        del it, loader
        timed = t2 - t1
        r = {
            "num_workers": w,
            "samples_per_s": args.batches * args.batch / timed,
            "timed_s": timed,
            "warmup_s": t1 - ts,
            "batches": args.batches,
            "warmup_batches": args.warmup,
        }
        results.append(r)
        log(f"num_workers={w}: {r['samples_per_s']:,.0f} samples/s ({args.batches} batches in {timed:.2f} s; warm-up {r['warmup_s']:.2f} s)")

    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "device": torch.cuda.get_device_name(0) if cuda else "cpu",
                "python": sys.version.split()[0],
                "samples": args.samples,
                "batch": args.batch,
                "warmup": args.warmup,
                "batches": args.batches,
                "data_gen_s": gen_s,
                "results": results,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
