//! The key codec: every distinct JavaScript string is a distinct byte string.
//! Well-formed strings are their UTF-8; strings with lone surrogates (which UTF-8 cannot
//! hold) are 0xFF, a byte UTF-8 never contains, followed by their UTF-16 code units.

use js_sys::JsString;
use wasm_bindgen::prelude::*;

use super::read::describe;
use crate::engine::Error;

/// Marks a key encoded as UTF-16 code units.
const UTF16_MARKER: u8 = 0xFF;

#[wasm_bindgen]
extern "C" {
    /// A JS string, seen through the one method of it we need.
    #[wasm_bindgen(extends = JsString)]
    type Text;

    /// `String.prototype.isWellFormed`: false when the string holds a lone surrogate.
    #[wasm_bindgen(method, js_name = isWellFormed)]
    fn is_well_formed(this: &Text) -> bool;
}

/// Encodes the string `key` into `out`; anything else is a `TypeError` naming `field`.
pub(crate) fn encode_key(key: &JsValue, field: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    let Some(text) = key.dyn_ref::<JsString>() else {
        return Err(Error::WrongType {
            field: field.into(),
            expected: "a string",
            got: describe(key),
        });
    };
    out.clear();
    if text.unchecked_ref::<Text>().is_well_formed() {
        out.extend_from_slice(String::from(text).as_bytes());
    } else {
        out.push(UTF16_MARKER);
        for unit in text.iter() {
            out.extend_from_slice(&unit.to_le_bytes());
        }
    }
    Ok(())
}

/// The JS string `encode_key` made `bytes` from.
pub(crate) fn decode_key(bytes: &[u8]) -> JsValue {
    match bytes.split_first() {
        Some((&UTF16_MARKER, units)) => {
            let units: Vec<u16> = units
                .chunks_exact(2)
                .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
                .collect();
            JsString::from_char_code(&units).into()
        }
        // Keys without the marker came from a well-formed string: valid UTF-8.
        _ => JsValue::from_str(core::str::from_utf8(bytes).unwrap_or_default()),
    }
}
