"""CUDA IPC on the client side, through ctypes on libcuda (already loaded by torch) and torch's own
IPC events. The rules: an allocation is opened once per id and closed on `forget` or close; a batch's
tensors are read only after the current stream waited on its ready event; a release records an
interprocess event on the current stream, which the loader's stream waits on before it recycles."""

import ctypes

import torch

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
_TYPESTR = {
    "uint8": "|u1", "int8": "|i1", "int16": "<i2", "uint16": "<u2", "int32": "<i4", "uint32": "<u4",
    "float16": "<f2", "bfloat16": "<i2", "float32": "<f4", "float64": "<f8", "int64": "<i8",
}


class _Handle(ctypes.Structure):
    # c_ubyte, not c_char: assigning bytes to a c_char array copies up to the first NUL only, and a
    # CUipcMemHandle is binary (the first such client sent a truncated handle: CUDA_ERROR_INVALID_VALUE).
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


def ipc_handle(handle_hex):
    """The 64-byte CUipcMemHandle sent as hex, byte for byte."""
    raw = bytes.fromhex(handle_hex)
    if len(raw) != ctypes.sizeof(_Handle):
        raise ValueError(f"a CUDA IPC handle has {ctypes.sizeof(_Handle)} bytes, got {len(raw)}")
    return _Handle.from_buffer_copy(raw)


class _View:
    """Just enough of __cuda_array_interface__ (v2: no stream semantics; ordering is by our events)."""

    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, ptr, shape, typestr, owner):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 2}
        # Keeps the opened allocation referenced while a tensor views it.
        self.owner = owner


class _Mem:
    __slots__ = ("ptr", "bytes", "open")

    def __init__(self, ptr, size):
        self.ptr, self.bytes, self.open = ptr, size, True


class CudaIpc:
    def __init__(self, device):
        self.device = torch.device(device)
        torch.cuda.init()
        # Make the device's primary context current on this thread, as the runtime does on first use.
        torch.empty(1, device=self.device)
        self._lib = ctypes.CDLL("libcuda.so.1")
        self._open = self._lib.cuIpcOpenMemHandle_v2
        self._open.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        self._close = self._lib.cuIpcCloseMemHandle
        self._close.argtypes = [ctypes.c_uint64]
        self.mems = {}
        self.ready = {}
        self.release_events = []
        self._next_release = 0

    def _check(self, call, rc):
        if rc != 0:
            name = ctypes.c_char_p()
            self._lib.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{call} failed with {name.value.decode() if name.value else rc}")

    def open_mem(self, mem_id, handle_hex, size):
        h = ipc_handle(handle_hex)
        ptr = ctypes.c_uint64()
        with torch.cuda.device(self.device):
            self._check("cuIpcOpenMemHandle", self._open(ctypes.byref(ptr), h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        self.mems[mem_id] = _Mem(ptr.value, size)

    def forget(self, mem_id):
        m = self.mems.pop(mem_id, None)
        if m is not None and m.open:
            m.open = False
            with torch.cuda.device(self.device):
                self._check("cuIpcCloseMemHandle", self._close(m.ptr))

    def open_ready(self, event_id, handle_hex):
        self.ready[event_id] = torch.cuda.Event.from_ipc_handle(self.device, bytes.fromhex(handle_hex))

    def tensor(self, mem_id, offset, dtype, shape, anchor=None):
        """A tensor over bytes [offset, ...) of allocation `mem_id`. Its storage keeps its `_View` (and so
        `anchor`, NOTE [Kept batches] in torch.py) referenced for as long as it, or any view of it, lives."""
        m = self.mems[mem_id]
        t = torch.as_tensor(_View(m.ptr + offset, shape, _TYPESTR[dtype], m if anchor is None else (m, anchor)), device=self.device)
        if dtype == "bfloat16":
            t = t.view(torch.bfloat16)
        return t

    def wait_ready(self, event_id):
        torch.cuda.current_stream(self.device).wait_event(self.ready[event_id])

    def record_release(self, send):
        """An interprocess event recorded on the current stream; returns its id (announced once)."""
        if len(self.release_events) < 8:
            ev = torch.cuda.Event(enable_timing=False, blocking=False, interprocess=True)
            ev.record(torch.cuda.current_stream(self.device))
            self.release_events.append(ev)
            event_id = len(self.release_events) - 1
            send({"op": "event", "id": event_id, "handle": bytes(ev.ipc_handle()).hex()})
            return event_id
        # Reusing an event is safe: the loader then waits on a later point of the same stream.
        event_id = self._next_release
        self._next_release = (self._next_release + 1) % len(self.release_events)
        self.release_events[event_id].record(torch.cuda.current_stream(self.device))
        return event_id

    def close_memory(self):
        """Before the loader frees its memory: our queued kernels finish, then our mappings go."""
        torch.cuda.synchronize(self.device)
        for mem_id in list(self.mems):
            try:
                self.forget(mem_id)
            except RuntimeError:
                pass  # the loader is gone already; its memory went with it

    def close(self):
        """After the loader closed (or died): the events go last. The loader's stream may still be about
        to wait on a release event it was sent, and a wait on an event its owner destroyed never ends."""
        self.close_memory()
        self.ready.clear()
        self.release_events.clear()
