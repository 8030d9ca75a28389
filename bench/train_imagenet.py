#!/usr/bin/env python3
"""ImageNet-style training fed end to end: a torchvision ResNet-50 (bf16 autocast, channels-last, SGD)
trained from a JPEG folder (DIR/<class>/<image>) on a CUDA GPU, fed three ways in the same run:

  ceiling      the same loop on one batch already on the GPU (the model's own speed: no loader)
  stoker       stoker.torch.DataLoader, the ImageNet recipe decoded on the GPU
               ({"path": DIR, "size": 224, "view": "train", "normalize": ImageNet, "output": "bfloat16",
               "decode": "gpu"}), batches delivered on the device (CUDA IPC)
  torchvision  ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize through
               torch's DataLoader (pin_memory, persistent workers, prefetch_factor 4) at each --workers

  python3 bench/train_imagenet.py DIR [--epochs 4] [--batch 256] [--workers 8,16] [--sides ceiling,stoker,torchvision]
                                      [--json FILE]

Per side: images/s over the timed epochs (every epoch after the first, which warms cuDNN, the loader's
workers and the page cache), the data wait (1 − images/s ÷ the ceiling's), the time the loop spent in
next() (host-side), host cores busy over the timed epochs (/proc/stat: every process on the machine,
the loader's own processes included), and the first batch (from making the loader to holding its first
batch). The loop syncs once an epoch (loss.item()), as a training loop that logs per epoch does.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def busy_jiffies():
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    v = [int(x) for x in parts]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle


def make_model(classes):
    import torchvision
    model = torchvision.models.resnet50(num_classes=classes).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return model, opt


def step(model, opt, loss_fn, images, labels):
    x = images.contiguous(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def train(batches_of_epoch, epochs, classes, make_loader=None):
    """Run `epochs` epochs; batches_of_epoch(e) yields (images on cuda, int64 labels on cuda)."""
    model, opt = make_model(classes)
    loss_fn = torch.nn.CrossEntropyLoss()
    seen = 0
    in_next = 0.0
    t_timed = j_timed = None
    first = None
    t0 = time.perf_counter()
    for e in range(epochs):
        if e == 1:
            torch.cuda.synchronize()
            t_timed, j_timed = time.perf_counter(), busy_jiffies()
        it = iter(batches_of_epoch(e))
        loss = None
        while True:
            tn = time.perf_counter()
            try:
                images, labels = next(it)
            except StopIteration:
                break
            if first is None:
                first = time.perf_counter() - t0
            if e >= 1:
                in_next += time.perf_counter() - tn
                seen += labels.shape[0]
            loss = step(model, opt, loss_fn, images, labels)
        last_loss = loss.item() if loss is not None else float("nan")
    torch.cuda.synchronize()
    wall = time.perf_counter() - t_timed
    cores = (busy_jiffies() - j_timed) / os.sysconf("SC_CLK_TCK") / wall
    return {"imagesPerS": round(seen / wall, 1), "inNextS": round(in_next, 3), "nextShare": round(in_next / wall, 4),
            "coresBusy": round(cores, 2), "firstBatchS": round(first, 3), "timedImages": seen, "lastLoss": round(last_loss, 3)}


def classes_of(root):
    return sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))


def ceiling(root, batch, epochs, steps):
    classes = len(classes_of(root))
    g = torch.Generator().manual_seed(0)
    images = ((torch.rand(batch, 3, 224, 224, generator=g) - 0.45) / 0.226).to(torch.bfloat16).cuda()
    labels = torch.randint(0, classes, (batch,), generator=g).cuda()

    def epoch(_e):
        for _ in range(steps):
            yield images, labels
    return train(epoch, epochs, classes)


def stoker_side(root, batch, epochs):
    import stoker.torch
    classes = len(classes_of(root))
    t0 = time.perf_counter()
    loader = stoker.torch.DataLoader(
        source={"path": root, "size": 224, "view": "train", "normalize": {"mean": MEAN, "std": STD}, "output": "bfloat16", "decode": "gpu"},
        batch_size=batch, device="cuda", shuffle=True, seed=0, drop_last=True, dtypes={"label": torch.int64})
    made = time.perf_counter() - t0

    def epoch(_e):
        for b in loader:
            yield b["image"], b["label"].view(-1)
    try:
        r = train(epoch, epochs, classes)
    finally:
        loader.close()
    r["firstBatchS"] = round(r["firstBatchS"] + made, 3)
    return r


def torchvision_side(root, batch, epochs, workers):
    from torchvision import datasets, transforms
    t0 = time.perf_counter()
    recipe = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(root, transform=recipe)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, pin_memory=True, drop_last=True,
                                         persistent_workers=workers > 0, prefetch_factor=4 if workers > 0 else None)
    made = time.perf_counter() - t0

    def epoch(_e):
        for x, y in loader:
            yield x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    r = train(epoch, epochs, len(ds.classes))
    r["firstBatchS"] = round(r["firstBatchS"] + made, 3)
    del loader
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--epochs", type=int, default=4, help="epochs per side; the first is not timed")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--workers", default="8,16", help="torchvision num_workers to try")
    p.add_argument("--sides", default="ceiling,stoker,torchvision")
    p.add_argument("--json")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("train_imagenet: needs a CUDA GPU")
        sys.exit(2)
    torch.backends.cudnn.benchmark = True
    files = sum(len(fs) for _, _, fs in os.walk(a.dir))
    steps = files // a.batch
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, {os.cpu_count()} cores; {files} files in {a.dir}, "
          f"batch {a.batch}, {steps} steps an epoch, {a.epochs} epochs a side (the first not timed)", flush=True)
    results = []
    for side in a.sides.split(","):
        if side == "torchvision":
            runs = [("torchvision nw=%d" % w, lambda w=w: torchvision_side(a.dir, a.batch, a.epochs, w)) for w in map(int, a.workers.split(","))]
        elif side == "stoker":
            runs = [("stoker (decode gpu)", lambda: stoker_side(a.dir, a.batch, a.epochs))]
        elif side == "ceiling":
            runs = [("ceiling (batch on the GPU)", lambda: ceiling(a.dir, a.batch, a.epochs, steps))]
        else:
            p.error(f"--sides: unknown side {side!r} (ceiling, stoker, torchvision)")
        for name, run in runs:
            r = run()
            r["side"] = name
            results.append(r)
            print(json.dumps(r), flush=True)
    top = next((r["imagesPerS"] for r in results if r["side"].startswith("ceiling")), None)
    print(f"{'side':<28}{'images/s':>10}{'÷ ceiling':>11}{'data wait':>11}{'in next()':>11}{'cores':>8}{'first batch s':>15}")
    for r in results:
        ratio = r["imagesPerS"] / top if top else None
        r["ofCeiling"] = round(ratio, 4) if ratio else None
        wait = f"{max(0.0, 1 - ratio) * 100:.2f}%" if ratio else "—"
        print(f"{r['side']:<28}{r['imagesPerS']:>10.0f}{(f'{ratio:.3f}' if ratio else '—'):>11}{wait:>11}{r['nextShare'] * 100:>10.2f}%{r['coresBusy']:>8.2f}{r['firstBatchS']:>15.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
