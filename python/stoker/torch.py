"""`stoker.torch.DataLoader`: a PyTorch loader fed by Stoker's Node.js loader in its own process.

    loader = stoker.torch.DataLoader(source={"image": "x.npy", "label": "y.npy"}, batch_size=256, shuffle=True, device="cuda")
    for epoch in range(10):
        for batch in loader:            # one epoch per loop, like torch's DataLoader
            images, labels = batch["image"], batch["label"]

The rules: a batch stays what it was for as long as anything refers to it, as with torch's
DataLoader: `list(loader)` and tensors kept past their step are safe. When the loader holds the
whole dataset as it is (resident, no transform), the client gathers each batch itself from the
loader's columns, mapped once (CUDA IPC or shared memory): the batch's tensors are then the client's
own, made on the current stream, like an `index_select` of data already on the GPU (`gather=False`
turns this off). Otherwise a batch's tensors view a slot of the loader's memory, which goes back to
the loader once nothing in this process refers to the batch any more (NOTE [Kept batches]);
`recycle="next"` gives a slot back when the next batch is asked for instead (a loop must then clone
what it keeps). On CUDA the tensors are ordered on the current stream (it waits on the batch's ready
event) and the release is recorded on the current stream, so the loader never overwrites memory a
queued kernel still reads.

NOTE [Kept batches]
A leased batch (not gathered by the client) is handed out as tensors over its slot, made anew for
that batch, every one of them holding one *anchor* object through its storage (the memoryview of
the slot on the CPU, a token in each CUDA view's owner): whatever still views the slot — the batch,
a tensor of it, a view or a numpy array of one, an autograd graph that saved one — keeps the
anchor's reference count above the lease table's own. Each time a batch is asked for (and before
`epoch` or `stop`, which take back every other batch), leases whose anchor nothing else refers to
are released; the rest stay leased, across epochs too (the server keeps the seqs named in `keep`).
A loop that lets go of its batches thus holds two slots at most (the batch of its body, still
referenced when the next is asked for, and the next). A loop that keeps them (`list(loader)`) would
hold every slot and starve the loader, so a batch is handed out over its slot only while that
leaves one slot the loop does not hold; past that it is copied out of its slot into memory of its
own (one copy, as torch's DataLoader makes in collate) and the slot goes back at once. On the CPU a
kept batch stays valid after `close()` (the mapping lives as long as the anchor); on CUDA a kept
batch lives in the loader's memory, valid until the loader closes or re-opens (`load_state_dict`).
"""

import base64
import collections
import ctypes
import json
import mmap
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
import warnings
import weakref

import torch

from ._errors import BatchError, LoaderDied, StokerError

__all__ = ["DataLoader", "Batch", "BatchError", "StokerError", "LoaderDied", "synthetic", "find_loader"]

# The wire protocol (src/serve/protocol.ts has the spec): JSON lines, and 32-byte batch frames.
PROTOCOL_VERSION = 4
_FRAME_TAG = 0x01
_FRAME = struct.Struct("<BBHIIIIIII")
_FRAME_BYTES = _FRAME.size
_NO_EVENT = 0xFFFF
# NOTE [Known state] (src/serve/protocol.ts): a batch's position that says the state after it is the
# next epoch's start, and one that says the client must ask.
_NEXT_EPOCH = 0xFFFFFFFF
_UNTRACKED = 0xFFFFFFFE

_DTYPES = {
    "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "uint16": getattr(torch, "uint16", None), "uint32": getattr(torch, "uint32", None),
}


_RECYCLE = ("auto", "next")


class _Anchor:
    """NOTE [Kept batches]: referenced by every CUDA view of one leased batch, and by the lease table."""

    __slots__ = ()


def _refcounts(leases):
    """(seq, references to its anchor) for each lease; the same expression for the table and for `_ANCHOR_ALONE`."""
    return [(seq, sys.getrefcount(anchor)) for seq, anchor in leases.items()]


# References to an anchor that only the lease table holds, counted by the very code that counts them
# for a lease (the table's value, the loop's name, getrefcount's argument), not assumed.
_ANCHOR_ALONE = _refcounts({0: _Anchor()})[0][1]


class _Layout:
    """Where a layout's fields lie (NOTE [Lean frames], src/serve/protocol.ts), resolved when its first
    frame is read: the tensors of a slot, made once per slot (`views`), or made anew with their anchor
    for a batch handed out over its slot (`fresh`, NOTE [Kept batches])."""

    __slots__ = ("stride", "fields", "slab", "cuda", "cached")

    def __init__(self, m, slabs, cuda):
        self.stride = m["stride"]
        self.cuda = cuda
        self.slab = None
        self.cached = {}
        self.fields = []
        for f in m["fields"]:
            if "mem" in f:
                self.fields.append((f["name"], f["dtype"], None, 0, f["offset"], f["shape"], f["mem"]))
                continue
            dtype = _DTYPES.get(f["dtype"])
            if dtype is None:
                raise StokerError(f"field {f['name']!r} has dtype {f['dtype']}, which this torch ({torch.__version__}) lacks; "
                                  "cast it in a Stoker transform", "ERR_INVALID_TENSOR")
            self.slab = slabs[f["slab"]]
            count = f["bytes"] // torch.empty((), dtype=dtype).element_size()
            # A tuple, and None for a flat field (frombuffer's shape already): view() costs µs a call.
            shape = tuple(f["shape"])
            self.fields.append((f["name"], f["dtype"], dtype, count, f["offset"], None if shape == (count,) else shape, None))

    def views(self, slot):
        """The slot's tensors, made once: handed out as they are with recycle="next", else only copied from."""
        tensors = self.cached.get(slot)
        if tensors is None:
            tensors = self.cached[slot] = self._make(self.slab, slot * self.stride, None)
        return tensors

    def fresh(self, slot):
        """The slot's tensors made for one batch, and their anchor: referenced by each of them (through
        its storage) for as long as it, or anything viewing it, lives."""
        if self.slab is not None:
            anchor = memoryview(self.slab)[slot * self.stride:(slot + 1) * self.stride]
            return self._make(anchor, 0, None), anchor
        anchor = _Anchor()
        return self._make(None, slot * self.stride, anchor), anchor

    def _make(self, buf, base, owner):
        out = {}
        for name, dtype_name, dtype, count, offset, shape, mem in self.fields:
            if mem is not None:
                out[name] = self.cuda.tensor(mem, base + offset, dtype_name, shape, owner)
            else:
                t = torch.frombuffer(buf, dtype=dtype, count=count, offset=base + offset)
                out[name] = t if shape is None else t.view(shape)
        return out


def synthetic(n=50_000, shape=(3, 32, 32), classes=10, fail_at=None):
    """The built-in synthetic source: image byte j of sample i is (i + j) % 251, label i % classes."""
    options = {"n": n, "shape": list(shape), "classes": classes}
    if fail_at:
        options["failAt"] = list(fail_at)
    return {"builtin": "synthetic", "options": options}


def _unlink(path):
    """A shared-memory file the loader made for this client, unlinked once mapped (the mapping stays):
    the loader unlinks it too when told it is mapped, but a loader killed before that cannot, and the
    file would stay in /dev/shm."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _source_json(source):
    """`source` as the loader takes it: paths (str or os.PathLike) made absolute here, relative to this
    process's working directory, as torch's datasets read them (a server reached by `connect=` has its
    own); a module spec or a built-in source as it is."""
    def path(p):
        if not isinstance(p, (str, os.PathLike)) or not os.fspath(p):
            return p
        p = os.fspath(p)
        return p if re.match(r"(?i)(s3|https?)://", p) else os.path.abspath(p)  # a remote path as it is
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        return source  # a JSON spec, as `stoker serve --source` takes one
    if isinstance(source, (str, os.PathLike)):
        return path(source)
    if isinstance(source, (list, tuple)):
        return [path(p) for p in source]
    if isinstance(source, dict):
        if "module" in source or "builtin" in source:
            return source
        named = all(isinstance(v, (str, os.PathLike)) and os.fspath(v).lower().endswith(".npy") for v in source.values())
        if "path" in source and not named:
            return dict(source, path=path(source["path"]))  # one path and its source's options
        return {k: path(v) for k, v in source.items()}
    return source


def _check_dtypes(dtypes):
    if dtypes is None:
        return {}
    if not isinstance(dtypes, dict) or not all(isinstance(k, str) and isinstance(v, torch.dtype) for k, v in dtypes.items()):
        raise StokerError(f"dtypes: expected a dict of field name to torch.dtype, such as {{'label': torch.int64}}, got {dtypes!r}",
                          "ERR_INVALID_OPTION")
    return dict(dtypes)


def _draw_seed(generator=None):
    """NOTE [torch's defaults]
    A loader given no seed draws one as torch's DataLoader does (its sampler's and its workers' base
    seed): one int64 from `generator`, else torch's default generator, so that `torch.manual_seed(s)`
    before the loader is made makes its order reproducible, and an unseeded run differs from the last.
    It is drawn once, when the loader is made: the epoch's order is then Stoker's pure function of
    (seed, epoch), and `state_dict()` carries the seed. The other defaults are torch's too —
    batch_size 1, shuffle False, drop_last False — sent as the client's `defaults` of `open`, which
    the command line of a `stoker serve` the client connects to overrides (src/serve/protocol.ts)."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _json_seed(seed):
    """A seed as the loader takes it over JSON: past 2**53 a JSON number loses digits, so a decimal string."""
    if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 2 ** 53:
        return str(seed)
    return seed


def _camel(key):
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def find_loader(node="node", env=None):
    """The command that starts Stoker's loader (`<it> serve --once ...`), found as NOTE [Finding the loader] says.

    NOTE [Finding the loader]
    The loader is the `stoker` command of the npm package stoker-ml, found in this order:
    1. `STOKER_JS` (in `env`, else this process's environment): a path to bin/stoker.js, an override;
    2. walking up from the working directory, in each folder: `node_modules/.bin/stoker` (the
       project's `npm install stoker-ml`, as `npx stoker` finds it), or the folder itself being a
       checkout of stoker-ml (its package.json's name, and bin/stoker.js);
    3. the checkout this Python package is imported from (python/stoker inside a clone);
    4. `stoker` on `PATH` (`npm install -g stoker-ml` puts it in npm's global bin).
    A JavaScript file (what npm links, after its symlinks) is run with `node`; anything else (a shell
    shim, as pnpm writes) is run as it is. The client of one checkout speaks the protocol of the same
    checkout's loader: another version is refused at `open` (ERR_PROTOCOL), naming the command."""
    environ = os.environ if env is None else env
    override = environ.get("STOKER_JS")
    if override:
        return [node, override]
    d = os.getcwd()
    while True:
        bin_ = os.path.join(d, "node_modules", ".bin", "stoker")
        if os.path.exists(bin_):
            return _launcher(bin_, node)
        if _checkout(d):
            return [node, os.path.join(d, "bin", "stoker.js")]
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    here = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if _checkout(here):
        return [node, os.path.join(here, "bin", "stoker.js")]
    found = shutil.which("stoker", path=environ.get("PATH"))
    if found:
        return _launcher(found, node)
    raise StokerError(
        "cannot find Stoker's loader (the `stoker` command of the npm package stoker-ml): looked for STOKER_JS, "
        f"node_modules/.bin/stoker or a stoker-ml checkout in {os.getcwd()} and the folders above it, a checkout around "
        "this Python package, and `stoker` on PATH. Run `npm install stoker-ml` in your project (or `npm install -g "
        "stoker-ml`), set STOKER_JS=/path/to/stoker-ml/bin/stoker.js, pass command=[...], or connect= the socket of a "
        "running `stoker serve`", "ERR_INVALID_OPTION")


def _checkout(d):
    """Whether folder `d` is the npm package stoker-ml with its launcher (a clone, or the installed package)."""
    if not os.path.isfile(os.path.join(d, "bin", "stoker.js")):
        return False
    try:
        with open(os.path.join(d, "package.json"), encoding="utf-8") as f:
            return json.load(f).get("name") == "stoker-ml"
    except (OSError, ValueError, AttributeError):
        return False


def _launcher(path, node):
    """How to run the `stoker` at `path`: `node <path>` when it is JavaScript (npm's link to bin/stoker.js: node
    follows it), else as it is (a shell shim). The command names the path found, so errors say where it was."""
    real = os.path.realpath(path)
    try:
        with open(real, "rb") as f:
            head = f.read(128).split(b"\n", 1)[0]
    except OSError:
        head = b""
    if real.endswith((".js", ".mjs", ".cjs")) or (head.startswith(b"#!") and b"node" in head):
        return [node, path]
    return [path]


class Batch(dict):
    """A dict of field name → torch.Tensor, plus `epoch`, `index`, `rows`, `ids`, `picks`, and a lease."""

    __slots__ = ("epoch", "index", "rows", "_seq", "_ids", "_picks", "_loader", "_holds", "released")

    def __init__(self, loader, seq, epoch, index, rows, ids, picks, tensors):
        super().__init__(tensors)
        self.epoch = epoch
        self.index = index
        self.rows = rows
        self._seq = seq
        self._ids = ids
        self._picks = picks
        self._loader = loader
        self._holds = 0
        self.released = False

    def _id_tensor(self, raw, what):
        if raw is None:
            raise StokerError(f"batch.{what}: this loader was created without ids=True, so its batches carry no sample ids; "
                              f"pass stoker.torch.DataLoader(..., ids=True) to get them (4 bytes a row on the socket)",
                              "ERR_INVALID_OPTION")
        return torch.frombuffer(bytearray(raw), dtype=torch.int32).to(torch.int64) & 0xFFFFFFFF

    @property
    def ids(self):
        """Dataset sample id of each row (int64 tensor); needs DataLoader(ids=True)."""
        return self._id_tensor(self._ids, "ids")

    @property
    def picks(self):
        """Pick of each row (sample id × augment + repeat); needs DataLoader(ids=True)."""
        return self._id_tensor(self._picks if self._picks is not None else self._ids, "picks")

    def retain(self):
        """Keep this batch past the next batch with recycle="next"; pair with `release()`. (With
        recycle="auto", the default, a batch is kept for as long as anything refers to it anyway.)"""
        self._holds += 1
        return self

    def release(self):
        """Let the loader reuse this batch's memory (idempotent). Its tensors must not be read after."""
        if self.released:
            return
        if self._holds > 0:
            self._holds -= 1
            if self._holds > 0:
                return
        self.released = True
        self._loader._release(self)

    def _auto_release(self):
        if self._holds == 0:
            self.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


class DataLoader:
    """Batches from Stoker's loader, as dicts of torch.Tensor.

    source: a dataset path (.npy, .safetensors, .arrow, .tar or a shard pattern, an image folder;
        {"path": folder, "size": 224} to decode images to a size, with any other option of Stoker's
        sources.imageFolder beside them: "view", "normalize", "output", "decode", ...), several files as Stoker's sources
        take them — {"image": "x.npy", "label": "y.npy"} (named .npy columns), a list of .npy files
        (positional columns), of tar shards, or of Arrow or other files of one format (one dataset
        over them in order) —, a module spec {"module", "export", "options"}, or
        `stoker.torch.synthetic(...)`. Paths are relative to this process's working directory. May be
        omitted with `connect=` a server started with --source.
    batch_size (default 1), device ('cpu' default, 'cuda', 'cuda:N'), shuffle (default False; "block" or a
        dict such as {"window": 32} for the block shuffle, docs/options.md#block-shuffle), drop_last
        (default False), seed (default: drawn from `generator`, else torch's default generator, as torch's
        DataLoader draws its own: `torch.manual_seed(s)` makes it reproducible), and any DataLoader option
        of Stoker in snake_case (workers, mode, augment, prefetch, errors, ...). Unset, they are torch's
        DataLoader's defaults, unless the command line of a server given by `connect=` sets them.
    node / command: how to start the loader (default: `find_loader(node)` — STOKER_JS, the project's
        node_modules/.bin/stoker or a checkout, walking up from the working directory, the checkout
        around this package, `stoker` on PATH — then `serve --once`). connect: a socket path of a
        running `stoker serve`.
    slots: batches the loader may run ahead of the consumer (child mode).
    timeout: seconds to wait for any one message before raising (None: wait as long as the loader lives).
    ids: give each batch its sample ids and picks (`batch.ids`, `batch.picks`); off by default, since
        they are 4 bytes a row more per batch on the socket that most training loops never read.
    gather: let the client gather batches itself from the loader's resident columns when the loader's
        batches are just its rows (default True; the loader decides: see `loader.gathers`). Nothing then
        crosses the socket per batch and batches are not leased.
    recycle: when a leased batch's slot goes back to the loader. "auto" (default): once nothing in this
        process refers to the batch or to a tensor of it, so kept batches stay as they came, as with
        torch's DataLoader (NOTE [Kept batches]); a loop that keeps every batch gets them copied out of
        their slots past the first few. "next": when the next batch is asked for (Stoker's own lease
        rule, no check a batch and a full read-ahead): a batch or tensor kept past its step then holds
        a later batch's data, so clone what you keep, or `batch.retain()` it until `release()`.
    dtypes: {field: torch.dtype} to deliver fields as, e.g. {"label": torch.int64} for PyTorch's losses.
        When the client gathers, the column is cast once (a copy beside the loader's, in this
        process), so batches come in that dtype at no cost a batch; leased batches are cast a batch.
    Under torchrun each rank's loader takes its shard: the child inherits RANK / WORLD_SIZE.
    """

    def __init__(self, source=None, batch_size=None, device=None, shuffle=None, seed=None, *, drop_last=None,
                 generator=None, node="node", command=None, connect=None, slots=4, timeout=None, env=None, ids=False,
                 gather=True, dtypes=None, recycle="auto", **options):
        if recycle not in _RECYCLE:
            raise StokerError(f"recycle: expected 'auto' (a slot goes back once nothing refers to its batch) or 'next' "
                              f"(when the next batch is asked for), got {recycle!r}", "ERR_INVALID_OPTION")
        self._proc = None
        self._sock = None
        self._stderr_tail = collections.deque(maxlen=40)
        self._buf = bytearray()
        self._pos = 0
        self._pending = collections.deque()
        self._unacked = []
        self._ack_at = 1
        self._slabs = {}
        self._layouts = {}
        self._specs = {}
        self._recycle = recycle
        self._leases = {}
        self._cuda = None
        self._current = None
        self._active = None
        self._closed = False
        self._timeout = timeout
        self._source = _source_json(source)
        self._ids = bool(ids)
        self._gather = bool(gather)
        self._dtypes = _check_dtypes(dtypes)
        self._store = None
        self._store_map = None
        self._chunk = 1
        self._plan_ahead = None
        opts = {_camel(k): v for k, v in options.items()}
        given = (("batchSize", batch_size), ("device", None if device is None else str(device)), ("shuffle", shuffle),
                 ("dropLast", drop_last), ("seed", seed))
        for key, value in given:
            if value is not None:
                opts[key] = value
        # NOTE [torch's defaults]: what is not given is torch's DataLoader's (batches of 1, in order, the
        # short last batch kept, a seed drawn from torch's generator), under the server's command line.
        defaults = {"batchSize": 1, "shuffle": False, "dropLast": False}
        if seed is None and "seed" not in opts:
            defaults["seed"] = _draw_seed(generator)
        self._options = {k: _json_seed(v) if k == "seed" else v for k, v in opts.items()}
        self._defaults = {k: _json_seed(v) if k == "seed" else v for k, v in defaults.items() if k not in opts}
        self._next_epoch = 0
        self._resume = None
        self._consumed = None
        self._state = None
        self._state_seq = None
        self._known = None
        self._bases = {}
        self._gone = False
        try:
            path = connect if connect is not None else self._spawn(command or find_loader(node, env) + ["serve", "--once", "--slots", str(slots)], env)
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.settimeout(timeout)
            self._sock.connect(path)
            self._finalizer = weakref.finalize(self, _cleanup, self._sock, self._proc)
            self._open()
        except BaseException:
            self.close()
            raise

    # ---- process and channel -------------------------------------------------------------------

    def _spawn(self, command, env):
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=env if env is not None else os.environ.copy())
        threading.Thread(target=self._forward, args=(self._proc.stderr,), daemon=True).start()
        line = self._proc.stdout.readline()
        threading.Thread(target=self._forward, args=(self._proc.stdout,), daemon=True).start()
        try:
            ready = json.loads(line)
            return ready["socket"]
        except (ValueError, KeyError, TypeError):
            code = self._proc.wait(timeout=10) if line == b"" else None
            raise LoaderDied(f"the Stoker loader did not start ({' '.join(command)}; exit code {code}): {self._tail()}") from None

    def _forward(self, stream):
        for line in iter(stream.readline, b""):
            text = line.decode("utf-8", "replace")
            self._stderr_tail.append(text.rstrip("\n"))
            sys.stderr.write(text)
            sys.stderr.flush()

    def _tail(self):
        lines = list(self._stderr_tail)[-8:]
        return " | ".join(lines) if lines else "(nothing on stderr)"

    def _send_bytes(self, data):
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise self._died(f"sending to it failed ({e})") from None

    def _send(self, message):
        self._send_bytes((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def _died(self, what, said=None):
        """LoaderDied: `what` happened; with the loader's last word when a stopping server said why
        (ERR_SERVE_STOPPED: `said`, or found among the messages the client has not acted on)."""
        self._gone = True  # state_dict() answers from what the client knows from now on (NOTE [Known state])
        stopped = said if said is not None else self._stop_message()
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = "still running"
        if stopped is not None:
            return LoaderDied(f"the Stoker loader is gone: {stopped}; exit code {code}", "ERR_SERVE_STOPPED")
        return LoaderDied(f"the Stoker loader process is gone: {what}; exit code {code}; its stderr: {self._tail()}")

    def _stop_message(self):
        """The message of an ERR_SERVE_STOPPED the server sent that the client has not acted on yet, or None
        (what the socket still holds is read first, without waiting)."""
        try:
            while select.select([self._sock], [], [], 0)[0]:
                chunk = self._sock.recv(1 << 16)
                if not chunk:
                    break
                self._buf += chunk
        except (OSError, ValueError):
            pass  # a socket that failed, or was closed here, has nothing more to say
        pos = self._pos
        msgs = list(self._pending)
        while True:
            got = self._parse(pos)
            if got is None:
                break
            m, pos = got
            msgs.append(m)
        for m in msgs:
            if type(m) is not tuple and m.get("op") == "error" and m.get("code") == "ERR_SERVE_STOPPED":
                return m.get("message")
        return None

    def _fill(self):
        """More bytes from the socket; the releases we owe go out first (the loader may be waiting on them)."""
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        if self._unacked:
            self._flush_acks()
        try:
            chunk = self._sock.recv(1 << 16)
        except socket.timeout:
            raise StokerError(f"no message from the loader for {self._timeout} s (timeout=)", "ERR_TIMEOUT") from None
        except OSError as e:
            raise self._died(f"reading from it failed ({e})") from None
        if not chunk:
            raise self._died("the socket closed")
        self._buf += chunk

    def _parse(self, pos):
        """The message at byte `pos` of the buffer and the position after it, or None when it is not all
        there yet: a frame tuple (seq, epoch, index, rows, layout, slot, event, ids, picks) or a dict."""
        buf = self._buf
        n = len(buf)
        if pos >= n:
            return None
        if buf[pos] == _FRAME_TAG:
            if n - pos < _FRAME_BYTES:
                return None
            _, flags, event, seq, epoch, index, rows, layout, slot, position = _FRAME.unpack_from(buf, pos)
            end = pos + _FRAME_BYTES
            ids = picks = None
            if flags:
                width = rows * 4
                if n < end + width * ((flags & 1) + (flags >> 1 & 1)):
                    return None
                if flags & 1:
                    ids = bytes(buf[end:end + width])
                    end += width
                if flags & 2:
                    picks = bytes(buf[end:end + width])
                    end += width
            return (seq, epoch, index, rows, layout, slot, event, ids, picks, position), end
        nl = buf.find(b"\n", pos)
        if nl < 0:
            return None
        try:
            return json.loads(buf[pos:nl]), nl + 1
        except ValueError:
            raise StokerError(f"protocol: a line from the loader that is not JSON: {bytes(buf[pos:pos + 80])!r}",
                              "ERR_PROTOCOL") from None

    def _read(self):
        """The next message (see `_parse`), reading the socket until it is all there."""
        while True:
            got = self._parse(self._pos)
            if got is not None:
                self._pos = got[1]
                return got[0]
            self._fill()

    def _next(self):
        """The next message that is not bookkeeping (slabs, layouts, IPC memory and events are handled here);
        a frame comes back as (seq, epoch, index, rows, layout, slot, event, ids, picks), its layout resolved
        now (a `_Layout`: a later `slab`, `forget` or `layout-reset` does not concern it)."""
        while True:
            m = self._read()
            if type(m) is tuple:
                layout = self._specs.get(m[4])
                if layout is None:
                    layout = self._spec(m[4])
                return m[:4] + (layout,) + m[5:]
            op = m.get("op")
            if op == "layout":
                self._layouts[m["id"]] = m
            elif op == "state-base":
                self._base(m["state"])
            elif op == "layout-reset":
                self._layouts.clear()
                self._specs.clear()
            elif op == "slab":
                fd = os.open(m["path"], os.O_RDWR)
                try:
                    mapped = mmap.mmap(fd, m["bytes"])
                finally:
                    os.close(fd)
                _unlink(m["path"])
                # The old slab's layouts went with it; batches still kept there hold its mapping (their anchors).
                self._slabs = {m["slab"]: mapped}
                self._layouts.clear()
                self._specs.clear()
                self._send({"op": "slab-open", "slab": m["slab"]})
            elif op == "mem":
                self._need_cuda(m.get("device")).open_mem(m["id"], m["handle"], m["bytes"])
            elif op == "forget":
                gone = [k for k, v in self._layouts.items() if any(f.get("mem") == m["id"] for f in v["fields"])]
                for k in gone:
                    del self._layouts[k]
                    self._specs.pop(k, None)
                self._need_cuda().forget(m["id"])
            elif op == "ready":
                self._need_cuda().open_ready(m["id"], m["handle"])
            else:
                return m

    def _spec(self, layout_id):
        layout = self._layouts.get(layout_id)
        if layout is None:
            raise StokerError(f"protocol: a batch in layout {layout_id}, which the loader never sent", "ERR_PROTOCOL")
        spec = self._specs[layout_id] = _Layout(layout, self._slabs, self._cuda)
        return spec

    def _need_cuda(self, device=None):
        if self._cuda is None:
            from ._cuda import CudaIpc
            # A client gather's columns are announced before `opened` tells the device: `mem` names it.
            self._cuda = CudaIpc(device or self.device)
        return self._cuda

    def _raise(self, m):
        if m.get("code") == "ERR_SERVE_STOPPED":
            raise self._died("it was stopped", m.get("message", "stoker serve was stopped"))
        if "batch" in m:
            raise BatchError(m["message"], m["epoch"], m["batch"], m.get("ids", []), m["code"])
        raise StokerError(m["message"], m.get("code", "ERR_SERVE"))

    def _call(self, message, answer):
        """Send a request and wait for its answer; batches and epoch messages met on the way wait in `_pending`."""
        self._send(message)
        while True:
            m = self._next()
            if type(m) is not tuple:
                if m["op"] == answer:
                    return m
                # No epoch streams while a loader opens: any error then is the answer (an older server names no request).
                if m["op"] == "error" and (m.get("request") == message["op"] or message["op"] == "open"):
                    self._raise(m)
            self._pending.append(m)

    def _open(self):
        options = dict(self._options)
        if self._resume is not None:
            options["resume"] = self._resume
        message = {"op": "open", "options": options, "defaults": self._defaults, "ids": self._ids, "gather": self._gather}
        # A new loader frees the old one's memory: nothing of ours may map it by then.
        self._store = None
        self._store_map = None
        if self._cuda is not None:
            self._cuda.close_memory()
        if self._source is not None:
            message["source"] = self._source
        self._pending.clear()
        self._unacked = []
        self._leases.clear()  # a new loader: the old one's batches are all taken back (on the CPU a kept one stays mapped)
        m = self._call(message, "opened")
        # A plan asked ahead of the loader this open replaced is of no use now.
        self._plan_ahead = None
        self._pending = collections.deque(p for p in self._pending if type(p) is tuple or p["op"] != "plan")
        if m.get("protocol") != PROTOCOL_VERSION:
            started = f" (started as {' '.join(self._proc.args)})" if self._proc is not None else ""
            raise StokerError(f"the loader{started} speaks protocol {m.get('protocol')}, this client {PROTOCOL_VERSION}: run the "
                              "stoker.torch of the same Stoker version as the loader (python/ of its checkout or package; "
                              "STOKER_JS=/path/to/bin/stoker.js picks the loader)", "ERR_PROTOCOL")
        self._info = m
        self._state = m["state"]
        self._state_seq = None
        self._consumed = None
        self._known = None
        self._bases = {}
        self._layouts.clear()
        self._specs.clear()
        self._ack_at = max(1, m["slots"] // 2)
        self._next_epoch = m["state"]["epoch"]
        self._resume = None
        self.device = torch.device(m["device"]) if m["device"] != "cpu" else torch.device("cpu")
        unknown = [k for k in self._dtypes if k not in m["names"]]
        if unknown:
            raise StokerError(f"dtypes: no field {unknown[0]!r} in this loader's batches (its fields: "
                              f"{', '.join(m['names'])}); name one of those", "ERR_INVALID_OPTION")
        if m.get("gather"):
            self._map_store(m["gather"])

    def _map_store(self, g):
        """The loader's resident columns, viewed once (NOTE [Client gather], src/serve/session.ts)."""
        rows = g["rows"]
        store = {}
        if "path" in g:
            fd = os.open(g["path"], os.O_RDONLY)
            try:
                self._store_map = mmap.mmap(fd, g["fileBytes"], prot=mmap.PROT_READ)
            finally:
                os.close(fd)
            _unlink(g["path"])
            self._send({"op": "store-open"})
        row_bytes = 0
        for f in g["fields"]:
            shape = [rows] + list(f["shape"])
            if "mem" in f:
                store[f["name"]] = self._cuda.tensor(f["mem"], f["offset"], f["dtype"], shape)
            else:
                dtype = _DTYPES.get(f["dtype"])
                if dtype is None:
                    raise StokerError(f"field {f['name']!r} has dtype {f['dtype']}, which this torch ({torch.__version__}) lacks; "
                                      "cast it in a Stoker transform", "ERR_INVALID_TENSOR")
                count = f["bytes"] // torch.empty((), dtype=dtype).element_size()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a read-only mapping: torch warns that it is not writable
                    store[f["name"]] = torch.frombuffer(self._store_map, dtype=dtype, count=count, offset=f["offset"]).view(shape)
            row_bytes += f["bytes"] // max(1, rows)
        for name, dtype in self._dtypes.items():
            # Cast once here: every batch then comes in that dtype with no work of its own.
            store[name] = store[name].to(dtype)
        self._store = store
        # Batches are gathered a few at a time (one index_select per field for up to 8 batches, at most
        # 32 MiB): the launches, not the bytes, are what a small batch costs.
        self._chunk = max(1, min(8, (32 << 20) // max(1, row_bytes * self._info["batchSize"])))

    @property
    def gathers(self):
        """True when this client gathers batches itself from the loader's columns (see `gather=`)."""
        return self._store is not None

    # ---- iteration -----------------------------------------------------------------------------

    @property
    def names(self):
        return list(self._info["names"])

    @property
    def batch_size(self):
        return self._info["batchSize"]

    @property
    def world(self):
        """{'rank', 'worldSize', 'localRank', 'launcher', ...} as the loader resolved it."""
        return dict(self._info["world"])

    def __len__(self):
        return self._info["numBatches"]

    def set_epoch(self, epoch):
        """The epoch the next loop runs (each epoch has its own shuffle)."""
        self._next_epoch = int(epoch)

    def __iter__(self):
        if self._closed:
            raise StokerError("this loader is closed", "ERR_LOADER_CLOSED")
        if self._resume is not None:
            self._open()
        # One epoch streams at a time: an abandoned loop is stopped before the next starts, so none of
        # its batches can reach the new one.
        if self._active is not None:
            self._active.close()
        epoch = self._next_epoch
        self._next_epoch = epoch + 1
        self._active = self._gather_epoch(epoch) if self._store is not None else self._epoch(epoch)
        return self._active

    def _alive(self):
        """Raise LoaderDied once the loader is gone: before every batch is handed out, on every route
        (NOTE [A dead loader])."""
        # NOTE [A dead loader]
        # A batch the client can hand out without the loader — a gathered chunk, a frame already in the
        # buffer, the next epoch's plan asked for ahead — says nothing of whether the loader lives, so
        # each batch first takes what the socket holds without waiting: its end (the loader died, or
        # a stopping server closed it after saying why: ERR_SERVE_STOPPED) raises, as does the
        # child's exit. One select (and a waitpid for a child): a few µs a batch.
        sock = self._sock
        while select.select([sock], [], [], 0)[0]:
            try:
                chunk = sock.recv(1 << 16)
            except OSError as e:
                raise self._died(f"reading from it failed ({e})") from None
            if not chunk:
                raise self._died("the socket closed")
            self._buf += chunk
        if self._proc is not None and self._proc.poll() is not None:
            raise self._died("it exited")

    def _gather_epoch(self, epoch):
        """An epoch gathered here: one plan from the loader, then index_select on the current stream."""
        self._alive()
        try:
            m = self._plan(epoch)
            ep, batches, size, rows = m["epoch"], m["batches"], m["batchSize"], m["rows"]
            raw = base64.b64decode(m["samples"])
            picks_raw = base64.b64decode(m["picks"]) if "picks" in m else None
            positions = None
            if "positions" in m:
                positions = memoryview(base64.b64decode(m["positions"])).cast("I")
                for base in m["bases"]:
                    self._base(base)
            if "bounds" in m:
                bounds = torch.frombuffer(bytearray(base64.b64decode(m["bounds"])), dtype=torch.int32).tolist()
                start, end = (lambda b: bounds[b]), (lambda b: bounds[b + 1])
            else:
                start, end = (lambda b: b * size), (lambda b: min((b + 1) * size, rows))
            # Sample ids are below 2**31 (a dataset's length), so u32 reads as i32, and index_select
            # takes int32 indices as they are. On CUDA the ids go up from pinned memory without
            # blocking: a copy from pageable memory would wait for the whole queued stream (the last
            # epoch's steps) and leave the GPU idle while the host catches up. They are put there by
            # one memmove, not by torch's copy into pinned memory: that copy runs on the intra-op
            # thread pool, whose threads then spin (H200 run 15: 8 threads × 40–50 µs of CPU a batch
            # for the whole epoch, 640–810 µs a batch in all, against 66 µs with one torch thread).
            if self.device.type == "cuda":
                pinned = torch.empty(len(raw) // 4, dtype=torch.int32, pin_memory=True)
                ctypes.memmove(pinned.data_ptr(), raw, len(raw))
                idx = pinned.to(self.device, non_blocking=True)
            else:
                idx = torch.frombuffer(bytearray(raw), dtype=torch.int32) if rows else torch.zeros(0, dtype=torch.int32)
            store, chunk, keep_ids = self._store, self._chunk, self._ids
            b = 0
            while b < batches:
                self._alive()  # before the gather reads the loader's columns, as before every batch
                last = min(batches, b + chunk)
                s0 = start(b)
                sel = idx[s0:end(last - 1)]
                got = {name: col.index_select(0, sel) for name, col in store.items()}
                for i in range(b, last):
                    if i != b:
                        self._alive()
                    s, e = start(i), end(i)
                    tensors = {name: g[s - s0:e - s0] for name, g in got.items()}
                    ids = raw[4 * s:4 * e] if keep_ids else None
                    picks = picks_raw[4 * s:4 * e] if picks_raw is not None else None
                    self._consumed = (ep, i + 1)
                    self._known = (ep, positions[i]) if positions is not None else None
                    yield Batch(self, None, ep, i, e - s, ids, picks, tensors)
                b = last
        finally:
            self._active = None

    def _plan(self, epoch):
        """Epoch `epoch`'s plan: the one asked for ahead when it is that epoch's (else it is dropped and
        this one asked now); then the next epoch's is asked for, to be made while this one is gathered
        (NOTE [Client gather], src/serve/session.ts)."""
        ahead, self._plan_ahead = self._plan_ahead, None
        m = None
        if ahead is not None:
            got = self._take_pending("plan")
            m = got if got is not None else self._wait_for("plan", "epoch")
            if m["epoch"] != epoch:
                m = None  # set_epoch or a resume chose another epoch
        if m is None:
            m = self._call({"op": "epoch", "epoch": epoch}, "plan")
        self._send({"op": "epoch", "epoch": epoch + 1})
        self._plan_ahead = epoch + 1
        return m

    def _take_pending(self, op):
        """The first message `op` met on the way to another answer, removed from `_pending` (an error
        answering the request that message answers is raised instead)."""
        for i, m in enumerate(self._pending):
            if type(m) is tuple:
                continue
            if m["op"] == op or (m["op"] == "error" and m.get("request") == "epoch"):
                del self._pending[i]
                if m["op"] == "error":
                    self._raise(m)
                return m
        return None

    def _wait_for(self, answer, request):
        """Wait for `answer` to a request already sent (`request`: its op, for errors)."""
        while True:
            m = self._next()
            if type(m) is not tuple:
                if m["op"] == answer:
                    return m
                if m["op"] == "error" and m.get("request") == request:
                    self._raise(m)
            self._pending.append(m)

    def _epoch(self, epoch):
        self._send({"op": "epoch", "epoch": epoch, "keep": self._keep()})
        finished = False
        try:
            while True:
                # Asking for the next batch lets go of what the loop no longer holds (NOTE [Kept batches]),
                # before we wait for the next; then the loader must still live (NOTE [A dead loader]).
                if self._recycle == "next":
                    self._drop_current()
                elif self._leases:
                    self._collect()
                self._alive()
                m = self._pending.popleft() if self._pending else self._next()
                if type(m) is tuple:
                    self._consumed = m[0]
                    self._known = (m[1], m[9])
                    batch = self._hand_out(m)
                    m = None
                    yield batch
                    batch = None  # nothing of ours may hold it while the loop decides whether it keeps it
                    continue
                op = m["op"]
                if op == "end":
                    finished = True
                    return
                if op == "error":
                    finished = True
                    self._raise(m)
        finally:
            self._active = None
            self._drop_current()
            if not finished and not self._closed and self._sock is not None:
                self._stop()
            elif self._unacked and not self._closed and self._sock is not None:
                # The epoch is over: hand the last batches back now, not at the next read.
                try:
                    self._flush_acks()
                except StokerError:
                    pass

    def _hand_out(self, m):
        """Frame `m` of `_next` as the batch the loop gets (NOTE [Kept batches]): over its slot, or copied
        out of it when the loop holds all the slots but one."""
        seq, ep, index, rows, layout, slot, event, ids, picks, _ = m
        if event != _NO_EVENT:
            self._cuda.wait_ready(event)
        dtypes = self._dtypes
        if self._recycle == "next":
            tensors = layout.views(slot)
        elif len(self._leases) < self._info["slots"] - 1:
            tensors, self._leases[seq] = layout.fresh(slot)
        else:
            # One copy (on CUDA on the current stream, after the ready wait); the slot goes back now, its
            # release ordered after the copy (the release event is recorded on the same stream).
            tensors = {k: (v.to(dtypes[k]) if k in dtypes else v.clone()) for k, v in layout.views(slot).items()}
            self._unacked.append(seq)
            if len(self._unacked) >= self._ack_at:
                self._flush_acks()
            return Batch(self, None, ep, index, rows, ids, picks, tensors)
        if dtypes:
            tensors = {k: (v.to(dtypes[k]) if k in dtypes else v) for k, v in tensors.items()}
        batch = Batch(self, seq, ep, index, rows, ids, picks, tensors)
        if self._recycle == "next":
            self._current = batch
        return batch

    def _collect(self):
        """NOTE [Kept batches]: release every leased batch whose anchor nothing but the lease table refers to."""
        leases = self._leases
        for seq, refs in _refcounts(leases):
            if refs <= _ANCHOR_ALONE:
                del leases[seq]
                self._unacked.append(seq)
        if len(self._unacked) >= self._ack_at:
            self._flush_acks()

    def _keep(self):
        """Before `epoch` or `stop`, which take back every batch the client holds but those named: the
        batches the loop still holds (none with recycle="next"); the others are released first, on CUDA
        after an event on the current stream."""
        if self._recycle == "next" or not self._leases:
            return []
        self._collect()
        if self._unacked:
            self._flush_acks()
        return list(self._leases)

    def _stop(self):
        """Leaving an epoch early: the loader aborts it and takes back every batch we hold but those the loop
        still holds (NOTE [Kept batches])."""
        if self._cuda is not None:
            # The loader takes every held batch back at once: no queued kernel may still read one.
            torch.cuda.current_stream(self.device).synchronize()
        self._pending.clear()
        try:
            keep = self._keep()
            self._unacked = []
            self._send({"op": "stop", "keep": keep})
            while True:
                m = self._next()
                if type(m) is not tuple and m["op"] == "stopped":
                    break
        except StokerError:
            pass
        self._unacked = []

    def _drop_current(self):
        b, self._current = self._current, None
        if b is not None:
            b._auto_release()

    def _release(self, batch):
        if batch._seq is None or self._closed or self._sock is None:
            return
        if self._recycle == "auto" and self._leases.pop(batch._seq, None) is None:
            return  # released already: nothing referred to it, or the loader took it back
        self._unacked.append(batch._seq)
        if len(self._unacked) >= self._ack_at:
            self._flush_acks()

    def _flush_acks(self):
        """One release line for every batch released since the last (on CUDA after one event on the current stream)."""
        seqs, self._unacked = self._unacked, []
        event = "-"
        if self._cuda is not None and self.device.type == "cuda":
            event = self._cuda.record_release(self._send)
        self._send_bytes(f"R {event} {' '.join(map(str, seqs))}\n".encode())

    # ---- state ---------------------------------------------------------------------------------

    def state_dict(self):
        """Where this run stands (torchdata StatefulDataLoader style): resume with load_state_dict.

        The loader's state right after the last batch this loader yielded, asked of the loader (one
        round trip, only when a batch was taken since the last call). Once the loader is gone (it died,
        or the loader was closed before the state was fetched), the state the client knows for that
        batch (NOTE [Known state]): a checkpoint in the handler of LoaderDied is not lost."""
        if self._resume is not None:
            return {"stoker": dict(self._resume)}
        if self._consumed is not None and self._state_seq != self._consumed:
            m = None
            if not (self._closed or self._sock is None or self._gone):
                c = self._consumed
                ask = {"op": "state", "epoch": c[0], "taken": c[1]} if type(c) is tuple else {"op": "state", "seq": c}
                try:
                    m = self._call(ask, "state")
                except LoaderDied:
                    pass
            state = m["state"] if m is not None else self._known_state()
            if state is None:
                raise StokerError("state_dict(): the loader is gone, and the state after the last batch taken is not known here "
                                  "(a position past 2**32 - 3)", "ERR_LOADER_CLOSED")
            self._state, self._state_seq = state, self._consumed
        return {"stoker": dict(self._state)}

    def _base(self, state):
        """NOTE [Known state]: a base state (an epoch's, at position 0), kept for the last few epochs."""
        self._bases[state["epoch"]] = state
        while len(self._bases) > 4:
            del self._bases[min(self._bases)]

    def _known_state(self):
        """NOTE [Known state] (src/serve/protocol.ts): the state right after the last batch handed out, from the
        position it came with and its epoch's base state, without asking the loader; None when unknown."""
        if self._known is None:
            return None
        epoch, position = self._known
        if position == _UNTRACKED:
            return None
        if position == _NEXT_EPOCH:
            base = self._bases.get(epoch + 1)
            return None if base is None else dict(base)
        base = self._bases.get(epoch)
        return None if base is None else dict(base, position=position)

    def load_state_dict(self, state):
        """Continue at exactly the next batch of the saved run (the next loop runs the saved epoch's rest).
        A loader given no seed takes the saved run's (its own was drawn: NOTE [torch's defaults])."""
        self._resume = dict(state["stoker"])
        if "seed" in self._defaults and "seed" in self._resume:
            self._defaults["seed"] = _json_seed(int(self._resume["seed"]))
        self._next_epoch = self._resume["epoch"]

    # ---- lifetime ------------------------------------------------------------------------------

    def close(self):
        """Stop the loader (idempotent): frees its shared and device memory, ends the child process."""
        if self._closed:
            return
        if self._active is not None:
            try:
                self._active.close()
            except StokerError:
                pass
        if self._sock is not None and self._consumed is not None and self._state_seq != self._consumed:
            try:
                self.state_dict()  # so that state_dict() still answers after close
            except StokerError:
                pass
        self._closed = True
        self._current = None
        self._unacked = []
        self._pending.clear()
        # The loader frees its memory at close: our queued kernels finish, and our mappings go, first;
        # our release events only once the loader has closed (it may still wait on the last one).
        if self._cuda is not None:
            self._cuda.close_memory()
        if self._sock is not None:
            try:
                self._send({"op": "close"})
                while True:
                    m = self._next()
                    if type(m) is tuple:
                        continue
                    if m["op"] == "closed":
                        if "error" in m:
                            warnings.warn(f"stoker: the loader did not close cleanly: {m['error']}", RuntimeWarning, stacklevel=2)
                        break
                    if m["op"] == "error":
                        warnings.warn(f"stoker: the loader did not close cleanly: {m.get('message')}", RuntimeWarning, stacklevel=2)
                        break
            except StokerError:
                pass
        if self._cuda is not None:
            self._cuda.close()
        self._specs.clear()
        self._leases.clear()
        self._layouts.clear()
        self._slabs.clear()
        self._store = None
        self._store_map = None
        if self._sock is not None:
            self._sock.close()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _cleanup(sock, proc):
    try:
        sock.close()
    except OSError:
        pass
    if proc is not None and proc.poll() is None:
        proc.terminate()
