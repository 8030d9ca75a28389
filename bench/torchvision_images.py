#!/usr/bin/env python3
"""The torchvision side of bench/images.ts: ImageFolder + the ImageNet training recipe through
torch's DataLoader, at each num_workers asked for.

  torchvision_images.py DIR --workers 1,2,4 [--batch 64] [--epochs 1] [--limit N]

Recipe: RandomResizedCrop(224) (scale (0.08, 1), ratio (3/4, 4/3)), RandomHorizontalFlip(),
ToTensor(), Normalize(ImageNet mean, std) — on PIL images, as torchvision's ImageFolder loads them.
Without torchvision, the same recipe is written out on PIL and torch (what torchvision's functional
ops do for PIL images: crop, resize(BILINEAR), transpose, to_tensor, normalize; the box from a
transcription of RandomResizedCrop.get_params) and the output says "impl": "pil-transcription".

Per num_workers: time to first batch (from building the DataLoader), images/s over all --epochs
epochs after the first batch (as the Stoker side counts: every batch but the first, over the wall
time from the first batch to the end of the last epoch; with more than one epoch the workers are
persistent, as an expert's multi-epoch loop keeps them, so no epoch pays their start-up), and CPU
cores busy (this process and its reaped workers, getrusage, over the whole run / wall time). One
JSON line per setting, with "epochs".
"""

import json
import math
import os
import random
import resource
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
EXTS = (".jpg", ".jpeg", ".png", ".webp")


def _torchvision():
    try:
        import torchvision  # noqa: F401
        from torchvision import datasets, transforms
        return datasets, transforms
    except Exception:
        return None


def _rrc_box(w, h, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    area = h * w
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * random.uniform(scale[0], scale[1])
        aspect = math.exp(random.uniform(log_ratio[0], log_ratio[1]))
        cw = int(round(math.sqrt(target_area * aspect)))
        ch = int(round(math.sqrt(target_area / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            return random.randint(0, h - ch), random.randint(0, w - cw), ch, cw
    in_ratio = w / h
    if in_ratio < min(ratio):
        cw, ch = w, int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        ch, cw = h, int(round(h * max(ratio)))
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


class PilFolder(Dataset):
    """ImageFolder's listing and loader (PIL, convert('RGB')) with the recipe written out."""

    def __init__(self, root):
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
        self.samples = []
        for label, c in enumerate(self.classes):
            for dirpath, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for n in sorted(names):
                    if n.lower().endswith(EXTS):
                        self.samples.append((os.path.join(dirpath, n), label))
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        from PIL import Image
        path, label = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        top, left, ch, cw = _rrc_box(*img.size)
        img = img.crop((left, top, left + cw, top + ch)).resize((224, 224), Image.BILINEAR)
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(224, 224, 3).permute(2, 0, 1).float().div(255)
        return (t - self.mean) / self.std, label


def make_dataset(root):
    tv = _torchvision()
    if tv is None:
        return PilFolder(root), "pil-transcription"
    datasets, transforms = tv
    recipe = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])
    return datasets.ImageFolder(root, transform=recipe), "torchvision"


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def run(root, workers, batch, epochs, limit):
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    ds, impl = make_dataset(root)
    if limit:
        ds = torch.utils.data.Subset(ds, range(min(limit, len(ds))))
    loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
                        persistent_workers=workers > 0 and epochs > 1, prefetch_factor=4 if workers > 0 else None)
    first = None
    images = 0
    t_first = None
    for _ in range(epochs):
        for x, _y in loader:
            if first is None:
                first = time.perf_counter() - t0
                t_first = time.perf_counter()
            else:
                images += x.shape[0]
    t_end = time.perf_counter()
    wall = t_end - t0
    steady = t_end - t_first
    del loader  # workers joined: their CPU time is in RUSAGE_CHILDREN
    return {
        "side": "torchvision", "impl": impl, "workers": workers, "batch": batch, "epochs": epochs, "files": len(ds),
        "firstBatchS": round(first, 3), "imagesPerS": round(images / steady, 1) if steady > 0 else None,
        "coresBusy": round((cpu_seconds() - cpu0) / wall, 2),
    }


def main(argv):
    root = argv[0]
    opts = dict(zip(argv[1::2], argv[2::2]))
    workers = [int(w) for w in opts.get("--workers", "1").split(",")]
    batch = int(opts.get("--batch", "64"))
    epochs = int(opts.get("--epochs", "1"))
    limit = int(opts.get("--limit", "0"))
    torch.set_num_threads(1)
    for w in workers:
        print(json.dumps(run(root, w, batch, epochs, limit)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
