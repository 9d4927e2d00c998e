//! [`TextList`]: the value type of a setting that is a list of text (`anonymous_grants`); it
//! is read and shown as [`super::declare::SettingValue`] says.

/// A list of text values: a TOML array in the file, comma-separated in the environment variable
/// and the flag (so no item may hold a comma). Empty items are dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct TextList(pub Vec<String>);

impl std::str::FromStr for TextList {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<TextList, Self::Err> {
        Ok(TextList(
            text.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect(),
        ))
    }
}
