//! The one integration-test binary: a module per area. Do not add top-level files to `tests/`.
#![allow(clippy::unwrap_used)]
