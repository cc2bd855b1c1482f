//! Hooks compiled only into test and benchmark builds, never into the published package.

/// The trap switch (cargo feature `trap-switch`): consuming this key traps, as a bug in the
/// engine would, so the trap-recovery test can prove the shim replaces the instance.
#[cfg(all(feature = "trap-switch", target_arch = "wasm32"))]
pub(crate) fn trap_if_asked(key: &[u8]) {
    if key == b"\0trap-switch" {
        core::arch::wasm32::unreachable();
    }
}

#[cfg(not(all(feature = "trap-switch", target_arch = "wasm32")))]
pub(crate) fn trap_if_asked(_key: &[u8]) {}

/// The floor of the Node benchmark (cargo feature `bench-floor`): receives a key the way
/// the fast path does, nothing more.
#[cfg(feature = "bench-floor")]
#[wasm_bindgen::prelude::wasm_bindgen(js_name = receiveKey)]
pub fn receive_key(key: &str) -> usize {
    key.len()
}
