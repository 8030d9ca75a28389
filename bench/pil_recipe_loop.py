#!/usr/bin/env python3
"""One of `bench decode-scaling`'s (c) processes: torchvision's training recipe on PIL
(bench/torchvision_images.py's dataset: ImageFolder + RandomResizedCrop(224) + flip + ToTensor +
Normalize, or its PIL transcription without torchvision) over the files of a config, in a loop in
this one process (torch at 1 thread, no DataLoader).

  pil_recipe_loop.py CONFIG.json     (CONFIG: {"root": DIR, "paths": [...], "warm": N})

Protocol (the bench's): warm up on the first `warm` files, print "ready", wait for a line on stdin,
run every file once, print {"images", "s", "cpuMs"} (this process's getrusage over the loop).
"""

import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from torchvision_images import make_dataset  # noqa: E402


def cpu_ms():
    s = resource.getrusage(resource.RUSAGE_SELF)
    return (s.ru_utime + s.ru_stime) * 1000


def main(config):
    with open(config) as f:
        cfg = json.load(f)
    torch.set_num_threads(1)
    ds, _impl = make_dataset(cfg["root"])
    index = {path: i for i, (path, _label) in enumerate(ds.samples)}
    picks = [index[p] for p in cfg["paths"]]
    for i in picks[: cfg["warm"]]:
        ds[i]
    print("ready", flush=True)
    sys.stdin.readline()
    c0 = cpu_ms()
    t0 = time.perf_counter()
    for i in picks:
        ds[i]
    s = time.perf_counter() - t0
    print(json.dumps({"images": len(picks), "s": s, "cpuMs": cpu_ms() - c0}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
