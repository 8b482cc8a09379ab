//! The C ABI of cuframes: `libcuframes.so` / `libcuframes.a` with the
//! header `include/cuframes.h`, generated from this crate by cbindgen
//! (`scripts/gen-header.sh`). The contract (names, numbers, rules) is
//! `docs/c-api.md`.
//!
//! Layout, one module per C object: [`publisher`], [`subscriber`],
//! [`frame`], [`config`], [`layout`] (slot geometry before a publisher exists); [`types`] holds the enumerations and shared info
//! structs, [`error`] the status codes and the thread-local last error,
//! [`library`] the version calls, [`log`] where the library's messages
//! go. Every export runs behind the one panic
//! boundary of `panic.rs` (`ffi_boundary!`), checks every pointer it gets
//! (`ffi.rs`) and writes out-parameters only on success.
//!
//! The exports are `unsafe extern "C" fn`s where they take pointers: Rust
//! callers (the tests) must uphold the same contract as C callers.
#![allow(non_camel_case_types)]

#[macro_use]
mod panic;
mod ffi;
mod sized;

// Declaration order is the header's order of functions (hence the blank
// lines: rustfmt sorts a block of module declarations).
pub mod error;

pub mod library;

pub mod log;

pub mod types;

pub mod config;

pub mod layout;

pub mod publisher;

pub mod subscriber;

pub mod frame;

pub mod keys;

pub use config::*;
pub use error::*;
pub use frame::*;
pub use keys::*;
pub use layout::*;
pub use library::*;
pub use log::*;
pub use publisher::*;
pub use subscriber::*;
pub use types::*;
