# stoker.torch's own per-batch cost with the loader replaced by canned protocol-4 bytes: no socket wait, no
# server CPU — the Python the client runs per batch (frame parse, views, batch dict, release lines, the
# liveness check's one select), with 1 or 4 frames arriving per recv, and with a 3-op touch of each batch for
# scale; for each lease rule: recycle="next" (views made once per slot, a batch released when the next is
# asked for), recycle="auto" (the default: views made for each batch, released once nothing refers to it;
# NOTE [Kept batches]), and "auto" with a loop that keeps its last 64 batches (all but a few copied out of
# their slots). It builds the client's state by hand (internals: keep in step with python/stoker/torch.py).
#   python3 bench/torch_client_overhead.py [batches]
import sys, time, os, json, struct, collections
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..") + "/python")
import torch
import stoker.torch as st
from stoker.torch import DataLoader
NB = int(sys.argv[1]) if len(sys.argv) > 1 else 20000; B = 256; SLOTS = 4
QUIET = os.pipe()  # what the liveness check selects on: never readable, never closed
class FakeSock:
    def __init__(self, data, chunk): self.data = data; self.at = 0; self.chunk = chunk; self.sent = 0
    def recv(self, n):
        c = self.data[self.at:self.at + min(n, self.chunk)]; self.at += len(c); return c
    def sendall(self, b): self.sent += 1
    def fileno(self): return QUIET[0]
def make(chunk_frames, recycle):
    l = object.__new__(DataLoader)
    l.__dict__.update(dict(_proc=None, _stderr_tail=collections.deque(), _buf=bytearray(), _pos=0, _pending=collections.deque(),
        _unacked=[], _ack_at=SLOTS // 2, _slabs={0: bytearray(SLOTS * 790528)}, _layouts={}, _specs={}, _cuda=None, _current=None,
        _active=None, _closed=False, _timeout=None, _source=None, _ids=False, _consumed=None, _state=None, _state_seq=None,
        device=torch.device("cpu"), _next_epoch=0, _resume=None, _dtypes={}, _recycle=recycle, _leases={}, _info={"slots": SLOTS}))
    layout = {"op": "layout", "id": 0, "stride": 790528, "fields": [
        {"name": "image", "dtype": "uint8", "shape": [B, 3, 32, 32], "slab": 0, "offset": 0, "bytes": B * 3072},
        {"name": "label", "dtype": "int32", "shape": [B], "slab": 0, "offset": B * 3072, "bytes": B * 4}]}
    out = bytearray((json.dumps(layout) + "\n").encode())
    F = struct.Struct("<BBHIIIIIII")
    for i in range(NB):
        out += F.pack(1, 0, 0xFFFF, i, 0, i, B, 0, i % SLOTS, (i + 1) * B if i + 1 < NB else 0xFFFFFFFF)
    out += b'{"op":"end","epoch":0,"batches":%d}\n' % NB
    l._sock = FakeSock(bytes(out), chunk_frames * 32)
    return l
for recycle, keep in (("next", False), ("auto", False), ("auto", True)):
    for chunk in (1, 4):
        for touch in (False, True):
            l = make(chunk, recycle)
            g = l._epoch(0)
            kept = []
            t = time.perf_counter(); n = 0
            for b in g:
                if touch: b["image"].view(-1)[:64].sum()
                if keep:
                    kept.append(b)
                    del kept[:-64]
                n += 1
            dt = time.perf_counter() - t
            del kept
            print(f"recycle={recycle}{' (loop keeps its last 64 batches)' if keep else ''}: {n} batches, {chunk} frame(s) a recv, "
                  f"touch={touch}: {dt / n * 1e6:.2f} µs a batch, {l._sock.sent} sends", flush=True)
