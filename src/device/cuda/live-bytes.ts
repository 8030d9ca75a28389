// Internal: not exported from the package entry.
// Process-wide count of live device memory and page-locked host memory made through this binding,
// for leak tests ("counting, not trusting") and stats. The rule: a handle adds its bytes once when the
// driver call that made it succeeds and subtracts them once when it is disposed.

const live = { device: 0, registered: 0 };

/** Bytes currently allocated on devices (DeviceMemory) and page-locked on the host (RegisteredHost). */
export function cudaLiveBytes(): { device: number; registered: number } {
  return { ...live };
}

export function countDevice(delta: number): void {
  live.device += delta;
}

export function countRegistered(delta: number): void {
  live.registered += delta;
}
