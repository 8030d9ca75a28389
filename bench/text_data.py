#!/usr/bin/env python3
"""`bench text`'s data: a JSON Lines corpus and the byte-level BPE tokenizer.json both loaders
tokenize it with. Deterministic (a seed; the standard library only: `random`, `json`, `re`), so the
dev machine and the GPU host make the same files byte for byte.

Corpus: `corpus.jsonl`, one `json.dumps({"id": i, "source": ..., "text": ...})` per line. Document
lengths are log-normal in words (median 230 words, which is about 300 tokens of the tokenizer below;
sigma 0.9; clipped to [12, 6000] words, about 8 k tokens), so most documents are short and a long
tail is not. Words: 160 common English words (Zipf-weighted) and 6 000 made-up words of two to four
syllables (a few with accents, so UTF-8 is multi-byte), sentences of 4 to 24 words with commas,
capitals and ". ? !" — natural-ish text whose rare words a BPE splits into pieces.

Tokenizer: `tokenizer.json`, GPT-2 style — a ByteLevel pre-tokenizer (GPT-2's split regex, bytes
mapped to printable characters) and BPE merges learnt here from the first 2 000 documents, greedy by
pair count (ties: the smaller pair) until a vocabulary of 4 096 (256 bytes + merges + 2 specials);
`<|endoftext|>` appended to every document by the post-processor, `<pad>` for padding collators.
Written by hand in the format `tokenizer.save()` writes (merges as "a b" strings, which every
tokenizers version reads), so no library is needed; Hugging Face `tokenizers` loads it, from Python
and from Node (the `tokenizers` addon Stoker tokenizes with), and bench/text.ts checks they agree.

Usage: python3 bench/text_data.py <dir> [--docs 50000] [--seed 1234]   (prints one JSON line)
"""

import argparse
import heapq
import json
import math
import os
import random
import re
import sys
import time

COMMON = (
    "the of and to a in is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there been one all we their has would when if so no will more can what other its into only new "
    "some could time these two may then do first any my now such like our over man me even most made after also did "
    "many before must through back years where much your way well down should because each just those people how too "
    "little state good very make world still own see men work long get here between both life being under never day "
    "same another know while last might us great old year off come since against go came right used take three small "
    "water house light river city story number part place word again around however home small found thought went say "
    "head once general high upon school every dont does got united left until always away something fact though less"
).split()
ONSETS = ["b", "br", "c", "ch", "cr", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "pl", "qu",
          "r", "s", "sh", "sl", "st", "t", "th", "tr", "v", "w", "z", ""]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y", "é", "ö"]
CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "x"]
SOURCES = ["web", "books", "news", "forum", "wiki"]


def make_words(rng):
    made = set()
    words = []
    while len(words) < 6000:
        w = "".join(rng.choice(ONSETS) + rng.choice(VOWELS[:10] if rng.random() < 0.97 else VOWELS) + rng.choice(CODAS)
                    for _ in range(rng.choice((2, 2, 3, 3, 4))))
        if w not in made and w not in COMMON:
            made.add(w)
            words.append(w)
    vocab = COMMON + words
    # Zipf over ranks: the common words first, so they carry about half of the running text.
    weights = [1.0 / (r + 1) ** 1.05 for r in range(len(vocab))]
    cum = []
    total = 0.0
    for w in weights:
        total += w
        cum.append(total)
    return vocab, cum


def document(rng, vocab, cum):
    n_words = int(round(math.exp(rng.gauss(math.log(230), 0.9))))
    n_words = max(12, min(6000, n_words))
    out = []
    left = n_words
    while left > 0:
        k = min(left, rng.randint(4, 24))
        left -= k
        ws = rng.choices(vocab, cum_weights=cum, k=k)
        ws[0] = ws[0].capitalize()
        if k > 8 and rng.random() < 0.5:
            ws[rng.randint(2, k - 3)] += ","
        out.append(" ".join(ws) + rng.choice(".......?!"))
    return " ".join(out)


def bytes_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters (what the ByteLevel pre-tokenizer uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


# GPT-2's split, with \p{L} / \p{N} spelt for Python's re ([^\W\d_] is a letter, \d a digit).
SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")


def train_bpe(texts, vocab_size, n_special):
    """Greedy byte-level BPE over the word pieces of `texts`: the most frequent adjacent pair merges
    first (ties: the smaller pair as strings), counts kept up to date per word (a heap of candidates,
    stale entries skipped). Returns (vocab {token: id}, merges [(a, b)])."""
    b2u = bytes_to_unicode()
    freq = {}
    for t in texts:
        for piece in SPLIT.findall(t):
            freq[piece] = freq.get(piece, 0) + 1
    words = [[b2u[b] for b in p.encode("utf-8")] for p in freq]
    counts = list(freq.values())
    pairs = {}
    where = {}
    for wi, sym in enumerate(words):
        for a, b in zip(sym, sym[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + counts[wi]
            where.setdefault((a, b), set()).add(wi)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    vocab = {b2u[b]: b for b in range(256)}
    merges = []
    while len(vocab) < vocab_size - n_special and heap:
        c, p = heapq.heappop(heap)
        if pairs.get(p, 0) != -c or -c < 2:
            continue
        a, b = p
        new = a + b
        merges.append(p)
        vocab[new] = len(vocab)
        touched = {}
        for wi in where.pop(p, ()):
            sym = words[wi]
            f = counts[wi]
            for x, y in zip(sym, sym[1:]):
                pairs[(x, y)] -= f
                touched[(x, y)] = True
            out = []
            i = 0
            while i < len(sym):
                if i + 1 < len(sym) and sym[i] == a and sym[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            words[wi] = out
            for x, y in zip(out, out[1:]):
                pairs[(x, y)] = pairs.get((x, y), 0) + f
                where.setdefault((x, y), set()).add(wi)
                touched[(x, y)] = True
        pairs.pop(p, None)
        for q in touched:
            if pairs.get(q, 0) > 0:
                heapq.heappush(heap, (-pairs[q], q))
    return vocab, merges


def tokenizer_json(vocab, merges, specials):
    def added(tok, i):
        return {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    vocab = dict(vocab)
    for s in specials:
        vocab[s] = len(vocab)
    eos = specials[0]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added(s, vocab[s]) for s in specials],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": eos, "type_id": 1}}],
            "special_tokens": {eos: {"id": eos, "ids": [vocab[eos]], "tokens": [eos]}},
        },
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges],
        },
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--docs", type=int, default=50_000)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--vocab", type=int, default=4096)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    t0 = time.time()
    rng = random.Random(a.seed)
    vocab, cum = make_words(rng)
    corpus = os.path.join(a.dir, "corpus.jsonl")
    train = []
    size = 0
    with open(corpus + ".part", "w", encoding="utf-8") as f:
        for i in range(a.docs):
            text = document(rng, vocab, cum)
            if i < 2000:
                train.append(text)
            line = json.dumps({"id": i, "source": SOURCES[i % len(SOURCES)], "text": text}, ensure_ascii=False) + "\n"
            size += len(line.encode("utf-8"))
            f.write(line)
    os.replace(corpus + ".part", corpus)
    specials = ["<|endoftext|>", "<pad>"]
    bpe_vocab, merges = train_bpe(train, a.vocab, len(specials))
    with open(os.path.join(a.dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(bpe_vocab, merges, specials), f, ensure_ascii=False)
    print(json.dumps({"bench": "text-data", "dir": a.dir, "docs": a.docs, "bytes": size, "vocab": len(bpe_vocab) + len(specials),
                      "merges": len(merges), "seconds": round(time.time() - t0, 1)}))


if __name__ == "__main__":
    sys.exit(main())
