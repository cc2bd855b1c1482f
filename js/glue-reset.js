
// Appended by scripts/build.sh: forget the current instance so that the next initSync
// starts a fresh one. The shim calls it after a trap (WebAssembly.RuntimeError).
export function resetWasmInstance() {
  wasm = undefined;
}

// Appended by scripts/build.sh too: the current instance's memory, where the shim reads the
// numbers a limiter leaves in its slots (`decisionSlots`).
export function wasmMemory() {
  return wasm.memory;
}
