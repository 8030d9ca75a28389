// Internal: not exported from the package entry.
// A lease marks memory a batch holds. Once released, every Stoker API that would read that memory
// throws ERR_BATCH_RELEASED instead of returning bytes that may already belong to another batch.

export interface Lease {
  readonly released: boolean;
}
