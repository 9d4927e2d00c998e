//! Parsing message properties from the command line: `NAME=VALUE` and `NAME:TYPE=VALUE`.
//!
//! Without a type, the value's type is inferred: `true`/`false` are booleans, a plain decimal
//! integer is an `i64`, a decimal number with a fraction or exponent is an `f64`, and anything
//! else is a string. Words that Rust's float parser would accept (`inf`, `NaN`) stay strings,
//! because a user typing them almost always means the word. `NAME:str=VALUE` forces a string
//! (for `007` or `true` as text); `:int`, `:float` and `:bool` force and check the other types.

use anyhow::{bail, Context, Result};
use ferry_protocol::{Properties, PropertyValue};

/// Parses every `K=V` argument in order, rejecting a name given twice.
pub fn parse_properties<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Result<Properties> {
    let mut props = Vec::new();
    for arg in args {
        let (name, value) = parse_property(arg.as_ref())?;
        if props.iter().any(|(n, _)| *n == name) {
            bail!("property '{name}' is given more than once");
        }
        props.push((name, value));
    }
    Ok(props.into())
}

/// Parses one `NAME[:TYPE]=VALUE` argument.
pub fn parse_property(arg: &str) -> Result<(String, PropertyValue)> {
    let Some((key, raw)) = arg.split_once('=') else {
        bail!("property '{arg}' is not of the form NAME=VALUE");
    };
    let (name, forced) = match key.split_once(':') {
        Some((name, ty)) => (name, Some(ty)),
        None => (key, None),
    };
    if name.is_empty() {
        bail!("property '{arg}' has an empty name");
    }
    if name.chars().any(char::is_whitespace) {
        bail!("property name '{name}' contains whitespace");
    }
    let value = match forced {
        None => infer_value(name, raw)?,
        Some("str" | "string") => PropertyValue::Str(raw.to_string()),
        Some("int" | "i64") => PropertyValue::Int(
            raw.parse()
                .with_context(|| format!("property '{name}': '{raw}' is not an integer"))?,
        ),
        Some("float" | "f64") => {
            let f: f64 = raw
                .parse()
                .with_context(|| format!("property '{name}': '{raw}' is not a number"))?;
            PropertyValue::Float(f)
        }
        Some("bool") => match raw {
            "true" => PropertyValue::Bool(true),
            "false" => PropertyValue::Bool(false),
            _ => bail!("property '{name}': '{raw}' is not true or false"),
        },
        Some(other) => {
            bail!("property '{name}': unknown type '{other}' (use str, int, float or bool)")
        }
    };
    Ok((name.to_string(), value))
}

/// Infers the type of an untyped value.
fn infer_value(name: &str, raw: &str) -> Result<PropertyValue> {
    match raw {
        "true" => return Ok(PropertyValue::Bool(true)),
        "false" => return Ok(PropertyValue::Bool(false)),
        _ => {}
    }
    if is_integer_syntax(raw) {
        // An integer too large for i64 is an error rather than a silent float or string: the
        // user asked for a number and would get something else.
        return raw.parse::<i64>().map(PropertyValue::Int).map_err(|_| {
            anyhow::anyhow!(
                "property '{name}': integer {raw} is out of range (use {name}:str={raw} for text)"
            )
        });
    }
    if is_float_syntax(raw) {
        let f: f64 = raw
            .parse()
            .with_context(|| format!("property '{name}': '{raw}' is not a number"))?;
        if !f.is_finite() {
            bail!(
                "property '{name}': number {raw} is out of range (use {name}:str={raw} for text)"
            );
        }
        return Ok(PropertyValue::Float(f));
    }
    Ok(PropertyValue::Str(raw.to_string()))
}

/// Strips one leading sign.
fn unsigned(s: &str) -> &str {
    s.strip_prefix(['+', '-']).unwrap_or(s)
}

/// `[+-]?[0-9]+`
fn is_integer_syntax(s: &str) -> bool {
    let digits = unsigned(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `[+-]?(digits[.digits?] | .digits)([eE][+-]?digits)?`, with at least one fraction or
/// exponent (plain integers are handled before).
fn is_float_syntax(s: &str) -> bool {
    let body = unsigned(s);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = all_digits(int_part)
        && frac_part.is_none_or(all_digits)
        && (!int_part.is_empty() || frac_part.is_some_and(|f| !f.is_empty()));
    let exponent_ok = exponent.is_none_or(is_integer_syntax);
    mantissa_ok && exponent_ok && (frac_part.is_some() || exponent.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(arg: &str) -> PropertyValue {
        parse_property(arg).unwrap().1
    }

    #[test]
    fn infers_types() {
        assert_eq!(value("n=42"), PropertyValue::Int(42));
        assert_eq!(value("n=-7"), PropertyValue::Int(-7));
        assert_eq!(value("n=+7"), PropertyValue::Int(7));
        assert_eq!(value("f=1.5"), PropertyValue::Float(1.5));
        assert_eq!(value("f=-.5"), PropertyValue::Float(-0.5));
        assert_eq!(value("f=2."), PropertyValue::Float(2.0));
        assert_eq!(value("f=1e3"), PropertyValue::Float(1000.0));
        assert_eq!(value("f=1.5E-2"), PropertyValue::Float(0.015));
        assert_eq!(value("b=true"), PropertyValue::Bool(true));
        assert_eq!(value("b=false"), PropertyValue::Bool(false));
        assert_eq!(value("s=hello"), PropertyValue::Str("hello".into()));
        assert_eq!(value("s=True"), PropertyValue::Str("True".into()));
        assert_eq!(value("s="), PropertyValue::Str(String::new()));
        assert_eq!(value("s=1.2.3"), PropertyValue::Str("1.2.3".into()));
        assert_eq!(value("s=inf"), PropertyValue::Str("inf".into()));
        assert_eq!(value("s=NaN"), PropertyValue::Str("NaN".into()));
        assert_eq!(value("s=."), PropertyValue::Str(".".into()));
        assert_eq!(value("s=-"), PropertyValue::Str("-".into()));
        assert_eq!(value("s=1e"), PropertyValue::Str("1e".into()));
        assert_eq!(value("s=e5"), PropertyValue::Str("e5".into()));
        assert_eq!(value("s=a=b"), PropertyValue::Str("a=b".into()));
    }

    #[test]
    fn forced_types() {
        assert_eq!(value("zip:str=007"), PropertyValue::Str("007".into()));
        assert_eq!(value("b:str=true"), PropertyValue::Str("true".into()));
        assert_eq!(value("n:string=5"), PropertyValue::Str("5".into()));
        assert_eq!(value("n:int=5"), PropertyValue::Int(5));
        assert_eq!(value("n:float=5"), PropertyValue::Float(5.0));
        assert_eq!(value("n:bool=true"), PropertyValue::Bool(true));
        assert!(parse_property("n:int=x").is_err());
        assert!(parse_property("n:bool=yes").is_err());
        let e = parse_property("n:date=x").unwrap_err().to_string();
        assert!(e.contains("unknown type 'date'"), "{e}");
    }

    #[test]
    fn names_keep_their_spelling() {
        assert_eq!(parse_property("Color.x-y=1").unwrap().0, "Color.x-y");
        assert_eq!(parse_property("zip:str=1").unwrap().0, "zip");
    }

    #[test]
    fn rejects_malformed() {
        assert!(parse_property("novalue").is_err());
        assert!(parse_property("=5").is_err());
        assert!(parse_property(":str=5").is_err());
        assert!(parse_property("a b=5").is_err());
        let e = parse_property("n=99999999999999999999")
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
        assert!(parse_property("n=1e999").is_err());
    }

    #[test]
    fn rejects_duplicates_and_keeps_order() {
        let props = parse_properties(["b=1", "a=x"]).unwrap();
        assert_eq!(
            props,
            vec![
                ("b".to_string(), PropertyValue::Int(1)),
                ("a".to_string(), PropertyValue::Str("x".into()))
            ]
        );
        let e = parse_properties(["a=1", "a:str=2"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'a' is given more than once"), "{e}");
    }
}
