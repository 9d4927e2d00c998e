//! The machinery behind [`super::settings`]: the `settings!` macro that turns one declaration per
//! setting into the TOML schema, the `FERRY_*` environment reader, the `ferry serve` flags, the
//! `--check-config` printout and the documentation's settings table.
//!
//! A declaration names the setting once (`max_connections`); the file key is that name, the
//! environment variable is `FERRY_` and the name in capitals, the flag is `--` and the name with
//! dashes. Its `///` text is the documentation's "meaning" column and, without Markdown, the
//! flag's help. Its default is read from [`BrokerConfig::default`] (so the code's default, the
//! docs' and the help's cannot disagree), unless the declaration says `#[default = "..."]` for a
//! default that depends on the machine or needs a gloss.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::text_list::TextList;
use super::{BrokerConfig, ConfigError};

/// A value type a setting can have: read from an environment variable, shown as TOML.
pub trait SettingValue: Sized {
    /// Parses the text of environment variable for setting `key`.
    fn from_env(key: &'static str, text: &str) -> Result<Self, ConfigError>;
    /// The value for `--check-config` and the docs.
    fn shown(&self) -> Shown;
}

/// A setting's value as `--check-config` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// A string (TOML-quoted when printed).
    Text(String),
    /// A number or a boolean (printed as is).
    Bare(String),
}

impl Shown {
    /// The value as a TOML value.
    pub fn toml(&self) -> String {
        match self {
            Shown::Text(s) => toml::Value::String(s.clone()).to_string(),
            Shown::Bare(s) => s.clone(),
        }
    }

    /// The value as Markdown (strings in backticks).
    fn markdown(&self) -> String {
        match self {
            Shown::Text(s) => format!("`{s}`"),
            Shown::Bare(s) => s.clone(),
        }
    }

    /// The value as plain text.
    fn plain(&self) -> &str {
        match self {
            Shown::Text(s) | Shown::Bare(s) => s,
        }
    }
}

fn invalid_env(key: &'static str, text: &str, reason: String) -> ConfigError {
    ConfigError::Invalid {
        key,
        value: text.to_owned(),
        origin: "environment",
        reason,
    }
}

macro_rules! number_setting {
    ($($t:ty),*) => {$(
        impl SettingValue for $t {
            fn from_env(key: &'static str, text: &str) -> Result<Self, ConfigError> {
                text.trim()
                    .parse()
                    .map_err(|e: std::num::ParseIntError| invalid_env(key, text, e.to_string()))
            }
            fn shown(&self) -> Shown {
                Shown::Bare(self.to_string())
            }
        }
    )*};
}
number_setting!(u32, u64);

impl SettingValue for bool {
    fn from_env(key: &'static str, text: &str) -> Result<Self, ConfigError> {
        match text.trim() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(invalid_env(key, text, "expected true or false".into())),
        }
    }
    fn shown(&self) -> Shown {
        Shown::Bare(self.to_string())
    }
}

impl SettingValue for String {
    fn from_env(_key: &'static str, text: &str) -> Result<Self, ConfigError> {
        Ok(text.to_owned())
    }
    fn shown(&self) -> Shown {
        Shown::Text(self.clone())
    }
}

impl SettingValue for PathBuf {
    fn from_env(_key: &'static str, text: &str) -> Result<Self, ConfigError> {
        Ok(PathBuf::from(text))
    }
    fn shown(&self) -> Shown {
        Shown::Text(self.display().to_string())
    }
}

impl SettingValue for TextList {
    fn from_env(_key: &'static str, text: &str) -> Result<Self, ConfigError> {
        Ok(text.parse().unwrap_or_default())
    }
    fn shown(&self) -> Shown {
        let items: Vec<String> = self
            .0
            .iter()
            .map(|item| toml::Value::String(item.clone()).to_string())
            .collect();
        Shown::Bare(format!("[{}]", items.join(", ")))
    }
}

/// What the documentation and the tools know of one setting.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The file key, also the base of the variable's and the flag's names.
    pub key: &'static str,
    /// What it means (Markdown).
    pub help: &'static str,
    /// The default as the docs say it, when it is not simply [`BrokerConfig::default`]'s value.
    pub default_doc: Option<&'static str>,
    /// The value in a resolved configuration; `None` when unset (chosen at start).
    pub show: fn(&BrokerConfig) -> Option<Shown>,
}

impl Setting {
    /// The environment variable: `FERRY_` and the key in capitals.
    pub fn env_var(&self) -> String {
        format!("FERRY_{}", self.key.to_ascii_uppercase())
    }

    /// The `ferry serve` flag: `--` and the key with dashes.
    pub fn flag(&self) -> String {
        format!("--{}", self.key.replace('_', "-"))
    }

    /// The default, in Markdown.
    pub fn default_markdown(&self) -> String {
        match self.default_doc {
            Some(doc) => doc.to_owned(),
            None => (self.show)(defaults()).map_or_else(String::new, |v| v.markdown()),
        }
    }

    /// The help text without its Markdown, for `--help`.
    pub fn plain_help(&self) -> String {
        plain(self.help.trim())
    }
}

/// [`BrokerConfig::default`], computed once (the memory budget's default reads the machine).
pub(crate) fn defaults() -> &'static BrokerConfig {
    static DEFAULTS: OnceLock<BrokerConfig> = OnceLock::new();
    DEFAULTS.get_or_init(BrokerConfig::default)
}

/// Markdown to plain text: code spans lose their backticks, links keep their text.
fn plain(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        match c {
            '`' => {}
            '[' => {
                // `[text](target)` keeps `text`; a lone `[` stays.
                let link = rest
                    .split_once("](")
                    .and_then(|(text, after)| Some((text, after.split_once(')')?.1)));
                match link {
                    Some((text, after)) if !text.contains('[') => {
                        out.push_str(text);
                        rest = after;
                    }
                    _ => out.push(c),
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The `--help` text of the flag of setting `key`: its help and its default.
pub fn flag_help(key: &str) -> String {
    let Some(setting) = super::settings::SETTINGS.iter().find(|s| s.key == key) else {
        return String::new();
    };
    let default = match setting.default_doc {
        Some(doc) => plain(doc),
        None => (setting.show)(defaults()).map_or_else(String::new, |v| v.plain().to_owned()),
    };
    format!("{} [default: {default}]", setting.plain_help())
}

/// The resolved configuration as TOML, one line per setting in declaration order; an unset
/// setting is a comment saying what is chosen at start.
pub fn to_toml(config: &BrokerConfig) -> String {
    let mut out = String::new();
    for s in super::settings::SETTINGS {
        match (s.show)(config) {
            Some(v) => out.push_str(&format!("{} = {}\n", s.key, v.toml())),
            None => out.push_str(&format!(
                "# {}: {}\n",
                s.key,
                plain(s.default_doc.unwrap_or("chosen at start"))
            )),
        }
    }
    out
}

/// The settings table of docs/operations.md, generated from the declarations.
pub fn settings_table() -> String {
    let mut out = String::from(
        "| file key | environment | flag | default | meaning |\n|---|---|---|---|---|\n",
    );
    for s in super::settings::SETTINGS {
        out.push_str(&format!(
            "| `{}` | `{}` | `{}` | {} | {} |\n",
            s.key,
            s.env_var(),
            s.flag(),
            s.default_markdown(),
            s.help.trim()
        ));
    }
    out
}

/// The setting `FERRY_<KEY>` names (`None` for other variables, lower case ones included).
pub(crate) fn env_key(var: &str) -> Option<String> {
    let rest = var.strip_prefix("FERRY_")?;
    (!rest.bytes().any(|b| b.is_ascii_lowercase())).then(|| rest.to_ascii_lowercase())
}

/// Reads a field of the configuration (`field(a.b)`) or runs a declaration's own getter.
macro_rules! setting_get {
    ($cfg:ident, field ($($f:ident).+)) => {
        Some($cfg.$($f).+.clone())
    };
    ($cfg:ident, custom {
        get: |$c:ident| $get:expr,
        set: |$_c:ident, $_v:ident, $_o:ident| $_set:expr $(,)?
    }) => {{
        let $c = $cfg;
        $get
    }};
}

/// Stores a value into a field of the configuration, or runs a declaration's own setter
/// (which may return early with a [`ConfigError`]).
macro_rules! setting_set {
    ($cfg:ident, $v:ident, $origin:ident, field ($($f:ident).+)) => {
        $cfg.$($f).+ = $v;
    };
    ($cfg:ident, $v:ident, $origin:ident, custom {
        get: |$_c:ident| $_get:expr,
        set: |$c:ident, $val:ident, $o:ident| $set:expr $(,)?
    }) => {{
        let $c = &mut *$cfg;
        let $val = $v;
        let $o: &'static str = $origin;
        let _ = $o;
        $set;
    }};
}

/// Declares the broker's settings: see [`super::settings`] for the form.
macro_rules! settings {
    ($(
        $(#[doc = $help:literal])+
        $(#[default = $default:literal])?
        $(#[arg($($arg:tt)*)])?
        $name:ident: $ty:ty, $value_name:literal => $kind:ident $access:tt;
    )*) => {
        /// One layer of settings (the TOML file, the environment or the flags); `None` leaves
        /// the value of the layer below.
        #[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, clap::Args)]
        #[serde(deny_unknown_fields)]
        pub struct ConfigLayer {
            $(
                $(#[doc = $help])+
                #[arg(
                    long,
                    value_name = $value_name,
                    help = $crate::config::declare::flag_help(stringify!($name))
                    $(, $($arg)*)?
                )]
                pub $name: Option<$ty>,
            )*
        }

        /// Every setting, in the order of the docs' table and `--check-config`.
        pub static SETTINGS: &[$crate::config::declare::Setting] = &[$(
            $crate::config::declare::Setting {
                key: stringify!($name),
                help: concat!($($help),+),
                default_doc: settings!(@default $($default)?),
                show: |cfg: &BrokerConfig| {
                    let value: Option<$ty> = setting_get!(cfg, $kind $access);
                    value.map(|v| $crate::config::declare::SettingValue::shown(&v))
                },
            },
        )*];

        impl ConfigLayer {
            /// Reads the `FERRY_*` variables of the settings from `vars` (other variables are
            /// ignored: `FERRY_SERVER` and `FERRY_NAME` belong to the client commands).
            pub fn from_env(
                vars: impl IntoIterator<Item = (String, String)>,
            ) -> Result<ConfigLayer, ConfigError> {
                use $crate::config::declare::SettingValue;
                let mut layer = ConfigLayer::default();
                for (var, text) in vars {
                    let Some(key) = $crate::config::declare::env_key(&var) else {
                        continue;
                    };
                    match key.as_str() {
                        $(stringify!($name) => {
                            layer.$name = Some(<$ty>::from_env(stringify!($name), &text)?);
                        })*
                        _ => {}
                    }
                }
                Ok(layer)
            }

            /// Whether this layer gives setting `key` a value.
            pub fn sets(&self, key: &str) -> bool {
                match key {
                    $(stringify!($name) => self.$name.is_some(),)*
                    _ => false,
                }
            }

            /// Applies the values this layer has to `cfg`; `origin` names the layer in errors.
            pub(crate) fn apply(
                &self,
                cfg: &mut BrokerConfig,
                origin: &'static str,
            ) -> Result<(), ConfigError> {
                $(
                    if let Some(v) = &self.$name {
                        let v: $ty = v.clone();
                        setting_set!(cfg, v, origin, $kind $access);
                    }
                )*
                Ok(())
            }
        }
    };
    (@default $default:literal) => { Some($default) };
    (@default) => { None };
}
