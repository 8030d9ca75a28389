#!/usr/bin/env python3
"""Train a torchvision ResNet-18 with batches from Stoker: the PyTorch loop is the usual one, and
only the loader line differs from a torch DataLoader script.

    python3 examples/torch_resnet.py                      # CIFAR-shaped in-memory data (synthetic)
    python3 examples/torch_resnet.py --folder DIR         # an image folder, DIR/<class>/<image>
    python3 examples/torch_resnet.py --device cuda        # batches stay on the GPU (CUDA IPC)

Needs torch and torchvision (skips with a message without torchvision) and Node 20 with this
repository's dependencies installed (npm install): the client starts `bin/stoker.js serve`.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
import stoker.torch  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--folder", help="an image folder (class sub-folders); default: synthetic CIFAR-shaped data")
p.add_argument("--size", type=int, default=32, help="decode images to size × size")
p.add_argument("--samples", type=int, default=10_000, help="synthetic samples")
p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--batch", type=int, default=256)
p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many steps (0: whole epoch)")
a = p.parse_args()

try:
    import torchvision
except ImportError:
    print("torch_resnet: torchvision is not installed; nothing to train (pip install torchvision)")
    sys.exit(0)

source = {"path": a.folder, "size": a.size} if a.folder else stoker.torch.synthetic(n=a.samples, classes=10)
classes = len([d for d in os.listdir(a.folder) if os.path.isdir(os.path.join(a.folder, d))]) if a.folder else 10
device = torch.device(a.device)

# The one line that differs from a torch DataLoader script:
loader = stoker.torch.DataLoader(source=source, batch_size=a.batch, device=a.device, shuffle=True, seed=0,
                                 dtypes={"label": torch.int64})  # int64 targets, as the loss wants them

model = torchvision.models.resnet18(num_classes=classes).to(device).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
amp = device.type == "cuda"

for epoch in range(a.epochs):
    t, seen, total = time.perf_counter(), 0, 0.0
    for step, batch in enumerate(loader):
        images, labels = batch["image"].to(device, non_blocking=True), batch["label"].to(device).view(-1)
        x = (images.float() / 255 - 0.5).contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.item()
        seen += labels.numel()
        if a.max_steps and step + 1 >= a.max_steps:
            break
    print(f"epoch {epoch}: loss {total / max(1, step + 1):.3f}, {seen / (time.perf_counter() - t):.0f} images/s")
    torch.save({"loader": loader.state_dict()}, os.devnull)  # a checkpoint would hold this to resume exactly

loader.close()
