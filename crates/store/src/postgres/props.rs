//! Message properties as jsonb: an array of `[name, type, value]` in the sender's order.
//!
//! Types are tagged (`b`, `i`, `f`, `s`) so an integer and a float never get confused. Floats
//! that JSON cannot hold (NaN, infinities, negative zero) are stored as their bit pattern under
//! tag `fb`. Strings containing NUL (which PostgreSQL text cannot hold) are stored as hex
//! under tag `sx`, and such names as `{"x": hex}`.

use ferry_protocol::{Properties, PropertyValue};
use serde_json::{json, Value};

use super::errors::bad_data;
use crate::error::StoreError;

/// Encodes properties as JSON text.
pub fn encode(props: &Properties) -> String {
    let items: Vec<Value> = props
        .iter()
        .map(|(name, v)| {
            let name = if name.contains('\0') {
                json!({ "x": hex(name.as_bytes()) })
            } else {
                Value::String(name.clone())
            };
            let (tag, value) = match v {
                PropertyValue::Bool(b) => ("b", json!(b)),
                PropertyValue::Int(i) => ("i", json!(i)),
                PropertyValue::Float(f)
                    if f.is_finite() && !(*f == 0.0 && f.is_sign_negative()) =>
                {
                    ("f", json!(f))
                }
                PropertyValue::Float(f) => ("fb", json!(f.to_bits().to_string())),
                PropertyValue::Str(s) if s.contains('\0') => ("sx", json!(hex(s.as_bytes()))),
                PropertyValue::Str(s) => ("s", json!(s)),
            };
            json!([name, tag, value])
        })
        .collect();
    Value::Array(items).to_string()
}

/// Decodes properties from JSON text.
pub fn decode(text: &str) -> Result<Properties, StoreError> {
    let bad = || bad_data("message properties");
    let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
    let items = v.as_array().ok_or_else(bad)?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let [name, tag, value] = item.as_array().map(Vec::as_slice).ok_or_else(bad)? else {
            return Err(bad());
        };
        let name = match name {
            Value::String(s) => s.clone(),
            Value::Object(o) => unhex(o.get("x").and_then(Value::as_str).ok_or_else(bad)?)?,
            _ => return Err(bad()),
        };
        let value = match tag.as_str().ok_or_else(bad)? {
            "b" => PropertyValue::Bool(value.as_bool().ok_or_else(bad)?),
            "i" => PropertyValue::Int(value.as_i64().ok_or_else(bad)?),
            "f" => PropertyValue::Float(value.as_f64().ok_or_else(bad)?),
            "fb" => {
                let bits: u64 = value
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(bad)?;
                PropertyValue::Float(f64::from_bits(bits))
            }
            "s" => PropertyValue::Str(value.as_str().ok_or_else(bad)?.to_owned()),
            "sx" => PropertyValue::Str(unhex(value.as_str().ok_or_else(bad)?)?),
            _ => return Err(bad()),
        };
        out.push((name, value));
    }
    Ok(out.into())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Result<String, StoreError> {
    let bad = || bad_data("hex-encoded property text");
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(bytes.len() / 2);
    for pair in bytes.chunks(2) {
        let text = std::str::from_utf8(pair).map_err(|_| bad())?;
        out.push(u8::from_str_radix(text, 16).map_err(|_| bad())?);
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_every_kind() {
        let props: Properties = vec![
            ("flag".into(), PropertyValue::Bool(false)),
            ("n".into(), PropertyValue::Int(i64::MIN)),
            ("x".into(), PropertyValue::Float(2.5)),
            ("nan".into(), PropertyValue::Float(f64::NAN)),
            ("negz".into(), PropertyValue::Float(-0.0)),
            ("inf".into(), PropertyValue::Float(f64::INFINITY)),
            ("s".into(), PropertyValue::Str("héllo".into())),
            ("nul\0name".into(), PropertyValue::Str("a\0b".into())),
        ]
        .into();
        let back = decode(&encode(&props)).unwrap();
        assert_eq!(back.len(), props.len());
        for ((n1, v1), (n2, v2)) in props.iter().zip(&back) {
            assert_eq!(n1, n2);
            match (v1, v2) {
                (PropertyValue::Float(a), PropertyValue::Float(b)) => {
                    assert_eq!(a.to_bits(), b.to_bits())
                }
                _ => assert_eq!(v1, v2),
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for text in [
            "",
            "{}",
            "[1]",
            "[[\"a\",\"q\",1]]",
            "[[\"a\",\"sx\",\"zz\"]]",
        ] {
            assert!(decode(text).is_err(), "{text}");
        }
    }
}
