
// Appended by scripts/build.sh: forget the current instance so that the next initSync
// starts a fresh one. The shim calls it after a trap (WebAssembly.RuntimeError).
export function resetWasmInstance() {
  wasm = undefined;
}
