#!/usr/bin/env python3
"""The torchvision side of bench/gpu-jpeg.ts, on the GPU host.

  gen DIR N        write N ImageNet-like 500x375 JPEGs (PIL, quality 90: smooth colour fields with
                   texture and noise, ~100 KB) into DIR, on every core.
  torch DIR BATCH  torchvision's nvJPEG decoder, files in RAM: decode_jpeg(list, device='cuda') per
                   batch (decode only), and decode + RandomResizedCrop(224, antialias=True) + flip per
                   image + normalize + bf16 stack (the same recipe as Stoker's bench). Two warm-up
                   batches, then every file once, twice; torch.cuda.synchronize() before each clock read.
  compare DIR DUMP Stoker's uint8 rows (bench/gpu-jpeg.ts --dump; replicated chroma in DUMP, interpolated
                   in DUMP.interp) against torchvision: decode_jpeg on the GPU + resized_crop(antialias=
                   True) in float, rounded; and PIL decode + the same resize on the CPU. Prints mean and
                   max |difference| per image.
Each prints one JSON line.
"""

import json
import os
import sys
import time
from multiprocessing import Pool

import numpy as np


def _one(args):
    path, seed = args
    from PIL import Image
    rng = np.random.default_rng(seed)
    h, w = 375, 500
    small = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
    field = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float32)
    yy, xx = np.mgrid[0:h, 0:w]
    texture = 30 * np.sin(xx / (3 + seed % 7)) * np.cos(yy / (4 + seed % 5))
    noise = rng.normal(0, 12, size=(h, w, 3))
    img = np.clip(field + texture[..., None] + noise, 0, 255).astype(np.uint8)
    Image.fromarray(img).save(path, quality=90)


def gen(d, n):
    os.makedirs(d, exist_ok=True)
    with Pool(os.cpu_count()) as p:
        p.map(_one, [(os.path.join(d, f"{i:06d}.jpg"), i) for i in range(n)], chunksize=64)
    sizes = [os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)]
    print(json.dumps({"gen": d, "files": len(sizes), "meanKB": round(sum(sizes) / len(sizes) / 1024, 1)}))


def _files(d):
    import torch
    from torchvision.io import read_file
    names = sorted(f for f in os.listdir(d) if f.endswith(".jpg"))
    return names, [read_file(os.path.join(d, n)) for n in names]


def bench(d, batch):
    import torch
    from torchvision.io import decode_jpeg
    from torchvision.transforms import RandomResizedCrop
    import torchvision.transforms.v2.functional as F
    _, files = _files(d)
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1)
    torch.manual_seed(0)

    def decode_only(chunk):
        decode_jpeg(chunk, device="cuda")

    def recipe(chunk):
        imgs = decode_jpeg(chunk, device="cuda")
        outs = []
        for img in imgs:
            i, j, h, w = RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
            x = F.resized_crop(img, i, j, h, w, [224, 224], antialias=True)
            if torch.rand(1).item() < 0.5:
                x = F.horizontal_flip(x)
            outs.append(x)
        x = torch.stack(outs).float().div_(255).sub_(mean).div_(std).to(torch.bfloat16)

    res = {}
    for name, fn in (("decodeOnly", decode_only), ("decodeRrcNormBf16", recipe)):
        for i in range(0, 2 * batch, batch):
            fn(files[i:i + batch])
        torch.cuda.synchronize()
        passes = []
        for _ in range(2):
            torch.cuda.synchronize()
            c0 = time.process_time()
            t0 = time.perf_counter()
            for i in range(0, len(files), batch):
                fn(files[i:i + batch])
            torch.cuda.synchronize()
            s = time.perf_counter() - t0
            passes.append({"imagesPerS": round(len(files) / s), "coresBusy": round((time.process_time() - c0) / s, 2)})
        res[name] = passes
    print(json.dumps({"bench": "torchvision-decode_jpeg-cuda", "torch": torch.__version__, "files": len(files), "batch": batch, **res}))


def compare(d, dump):
    import torch
    from PIL import Image
    from torchvision.io import decode_jpeg, read_file
    import torchvision.transforms.v2.functional as F
    meta = json.load(open(dump + ".json"))
    n = len(meta["files"])
    rows = np.fromfile(dump, dtype=np.uint8).reshape(n, 224, 224, 3)
    interp = np.fromfile(dump + ".interp", dtype=np.uint8).reshape(n, 224, 224, 3)
    out = []
    for k, (name, b) in enumerate(zip(meta["files"], meta["boxes"])):
        path = os.path.join(d, name)
        mine = torch.from_numpy(rows[k].copy()).permute(2, 0, 1).float()
        mine_interp = torch.from_numpy(interp[k].copy()).permute(2, 0, 1).float()
        gpu = decode_jpeg(read_file(path), device="cuda").float()
        pil = torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).float()
        res = {"file": name}
        for label, img, ours in (("replicateVsTorchvisionGpu", gpu, mine), ("replicateVsPil", pil, mine), ("interpolateVsPil", pil, mine_interp)):
            x = F.resized_crop(img, b["top"], b["left"], b["height"], b["width"], [224, 224], antialias=True)
            if b["flip"]:
                x = F.horizontal_flip(x)
            diff = (x.round().clamp(0, 255).cpu() - ours).abs()
            res[label] = {"mean": round(diff.mean().item(), 3), "max": int(diff.max().item())}
        out.append(res)
    print(json.dumps({"compare": out}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2], int(sys.argv[3]))
    elif cmd == "torch":
        bench(sys.argv[2], int(sys.argv[3]))
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3])
