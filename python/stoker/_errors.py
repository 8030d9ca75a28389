"""Errors that cross from the Node loader: `BatchError` names the epoch, batch and sample ids."""


class StokerError(RuntimeError):
    """The loader (or the channel to it) failed. `code` is Stoker's stable error code."""

    def __init__(self, message, code="ERR_SERVE"):
        super().__init__(message)
        self.code = code


class BatchError(StokerError):
    """One batch could not be made (the dataset threw, the device stayed full, the transform failed).
    The epoch that raised it is over; the loader stays usable for the next one."""

    def __init__(self, message, epoch, batch, ids, code="ERR_BATCH_FAILED"):
        super().__init__(message, code)
        self.epoch = epoch
        self.batch = batch
        self.ids = list(ids)


class LoaderDied(StokerError):
    """The loader process exited or its socket closed: raised at the next batch asked for, whatever the
    client still held. `code` is ERR_LOADER_DIED, or ERR_SERVE_STOPPED when `stoker serve` was stopped
    (SIGTERM) and said so before it closed the socket."""

    def __init__(self, message, code="ERR_LOADER_DIED"):
        super().__init__(message, code)
