//! Name checks shared by the engine's operations (PostgreSQL text cannot hold NUL).

use crate::error::StoreError;

/// Longest queue or client name, in bytes (as the embedded engine).
const MAX_NAME: usize = u16::MAX as usize;

/// `InvalidArgument` unless `name` is 1 to 65535 bytes without NUL.
pub fn check(what: &str, name: &str) -> Result<(), StoreError> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
        return Err(StoreError::InvalidArgument(format!(
            "{what} name must be 1 to 65535 bytes, without NUL"
        )));
    }
    Ok(())
}
