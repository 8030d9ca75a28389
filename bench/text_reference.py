#!/usr/bin/env python3
"""`bench text`'s reference: what an expert writes with PyTorch and Hugging Face for the same job —
a map-style Dataset over the JSONL by a line-offset index (built once, one positioned read (os.pread)
and json.loads per item), tokenizing in __getitem__ with Hugging Face `tokenizers` (Rust) from the same
tokenizer.json, truncated to 8 192 ids as Stoker's `maxLength`, and a PyTorch DataLoader (shuffle,
pinned memory off: the batches stay on the host as Stoker's do) with
  pad:     transformers.DataCollatorWithPadding (input_ids + attention_mask, padded to the longest);
  grouped: the same collator over transformers' LengthGroupedSampler (Trainer's group_by_length),
           the Hugging Face answer to padding waste.
`datasets` is not used (it is not installed on the GPU host); the Dataset is the one it would replace.
Each configuration: every num_workers of --workers, three warm-up batches, then batches for
--seconds; tokens/s counts real tokens (the attention mask's ones). Prints one JSON line, last:
{best: {pad, grouped}, runs, idsDigest, digestDocs}; idsDigest (sha256 of the int32 ids of the first
documents) lets bench/text.ts check both tokenizer libraries agree.
Usage: python3 bench/text_reference.py <dir> [--batch 32] [--seconds 8] [--workers 0,2,4,8]
"""

import argparse
import hashlib
import json
import os
import sys
import time

MAX_LEN = 8192


class JsonlDataset:
    """Map-style: item i is one positioned read of line i, json.loads, and the tokenizer's ids.
    Defined at module level so worker processes can unpickle it under any start method."""

    def __init__(self, corpus, tok_path, offsets):
        self.corpus, self.tok_path, self.offsets = corpus, tok_path, offsets
        self.tok = None
        self.f = None
        self.pid = None

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if self.f is None or self.pid != os.getpid():  # per process: its own file and tokenizer
            from tokenizers import Tokenizer
            self.f = os.open(self.corpus, os.O_RDONLY)
            self.tok = Tokenizer.from_file(self.tok_path)
            self.pid = os.getpid()
        start = int(self.offsets[i])
        rec = json.loads(os.pread(self.f, int(self.offsets[i + 1]) - start, start))
        return {"input_ids": self.tok.encode(rec["text"]).ids[:MAX_LEN]}

    def __getstate__(self):
        return {"corpus": self.corpus, "tok_path": self.tok_path, "offsets": self.offsets, "tok": None, "f": None, "pid": None}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--workers", default="0,2,4,8")
    p.add_argument("--digest-docs", type=int, default=256)
    a = p.parse_args()
    try:
        import numpy as np
        import torch
        from tokenizers import Tokenizer
        from transformers import DataCollatorWithPadding, PreTrainedTokenizerFast
        from transformers.trainer_pt_utils import LengthGroupedSampler
    except ImportError as e:
        print(json.dumps({"skipped": f"missing Python module: {e.name}"}))
        return
    corpus = os.path.join(a.dir, "corpus.jsonl")
    tok_path = os.path.join(a.dir, "tokenizer.json")

    # The line-offset index: one pass, kept as numpy arrays (what a worker process inherits).
    starts = []
    with open(corpus, "rb") as f:
        pos = 0
        for line in f:
            if line.strip():
                starts.append(pos)
            pos += len(line)
    starts.append(pos)
    offsets = np.array(starts, dtype=np.int64)

    hf_tok = PreTrainedTokenizerFast(tokenizer_file=tok_path, pad_token="<pad>", eos_token="<|endoftext|>")
    collator = DataCollatorWithPadding(hf_tok, padding="longest", return_tensors="pt")
    ds = JsonlDataset(corpus, tok_path, offsets)

    digest_docs = min(a.digest_docs, len(ds))
    h = hashlib.sha256()
    probe = JsonlDataset(corpus, tok_path, offsets)
    for i in range(digest_docs):
        h.update(np.asarray(probe[i]["input_ids"], dtype="<i4").tobytes())

    lengths = None

    def loader(kind, workers):
        g = torch.Generator()
        g.manual_seed(7)
        kw = dict(batch_size=a.batch, collate_fn=collator, num_workers=workers, generator=g)
        if workers > 0:
            kw.update(persistent_workers=False, prefetch_factor=4)
        if kind == "grouped":
            return torch.utils.data.DataLoader(ds, sampler=LengthGroupedSampler(a.batch, lengths=lengths, generator=g), **kw)
        return torch.utils.data.DataLoader(ds, shuffle=True, **kw)

    def measure(kind, workers):
        real = slots = batches = 0
        start = None
        warm = 0
        for b in loader(kind, workers):
            if warm < 3:
                warm += 1
                if warm == 3:
                    start = time.perf_counter()
                continue
            mask = b["attention_mask"]
            real += int(mask.sum())
            slots += mask.numel()
            batches += 1
            if time.perf_counter() - start > a.seconds:
                break
        s = time.perf_counter() - start
        return {"config": kind, "workers": workers, "tokensPerS": real / s, "waste": (slots - real) / max(slots, 1), "batches": batches}

    workers = [int(w) for w in a.workers.split(",")]
    runs = [measure("pad", w) for w in workers]
    # LengthGroupedSampler needs every length up front: tokenize once (timed apart, not in tokens/s).
    t0 = time.perf_counter()
    enc = Tokenizer.from_file(tok_path)
    with open(corpus, "rb") as f:
        lengths = [min(len(e.ids), MAX_LEN) for e in enc.encode_batch([json.loads(l)["text"] for l in f if l.strip()])]
    lengths_s = time.perf_counter() - t0
    best_pad = max(runs, key=lambda r: r["tokensPerS"])
    runs.append(measure("grouped", best_pad["workers"]))
    import tokenizers
    import transformers
    print(json.dumps({
        "best": {"pad": best_pad, "grouped": runs[-1]}, "runs": runs, "lengthsPassS": round(lengths_s, 2),
        "idsDigest": h.hexdigest(), "digestDocs": digest_docs, "docs": len(ds), "batch": a.batch,
        "torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
    }))


if __name__ == "__main__":
    sys.exit(main())
