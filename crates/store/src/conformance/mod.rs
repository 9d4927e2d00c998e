//! The conformance suite every engine must pass, written only against `Arc<dyn Store>`.
