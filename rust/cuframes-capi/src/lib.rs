//! The C ABI of cuframes: `libcuframes.so` / `libcuframes.a` with the
//! header `include/cuframes.h`, generated from this crate by cbindgen
//! (`scripts/gen-header.sh`). The contract (names, numbers, rules) is
//! `docs/c-api.md`.
//!
//! Layout, one module per C object, each with its exports, its config and
//! the structs and enumerations that are its alone: [`publisher`],
//! [`subscriber`], [`frame`] (a leased frame, its info, properties and side
//! data), [`keys`] (listing the live keys), [`layout`] (slot geometry before
//! a publisher exists), [`log`] (where the library's messages go),
//! [`library`] (versions, key validation), [`error`] (the status codes, the
//! thread-local last error). [`stream`] holds what several of them share:
//! the stream info and the enumerations it carries. Every export runs
//! behind the one panic boundary of `panic.rs` (`ffi_boundary!`), checks
//! every pointer it gets (`ffi.rs`), reads and writes growable structs by
//! their `struct_size` (`sized.rs`, generic over the `Growable` trait that
//! each struct's module implements) and writes out-parameters only on
//! success.
//!
//! Imports go one way, never in a circle: the helpers (`panic`, `ffi`,
//! `sized`) use only `error` and one another, never an object's module;
//! `stream` uses the helpers; an object's module may use the helpers,
//! `stream`, `log` and, for `publisher` and `subscriber`, `frame`.
//!
//! The exports are `unsafe extern "C" fn`s where they take pointers: Rust
//! callers (the tests) must uphold the same contract as C callers.
#![allow(non_camel_case_types)]

#[macro_use]
mod panic;
mod ffi;
mod sized;

// Declaration order is the header's order (cbindgen reads the modules in
// it): of the functions, and of the constants within each kind (plain
// numbers come before the types, typed ones after). Hence the blank lines:
// rustfmt sorts a block of module declarations.
pub mod error;

pub mod library;

pub mod log;

pub mod stream;

pub mod layout;

pub mod publisher;

pub mod subscriber;

pub mod frame;

pub mod keys;

pub use error::*;
pub use frame::*;
pub use keys::*;
pub use layout::*;
pub use library::*;
pub use log::*;
pub use publisher::*;
pub use stream::*;
pub use subscriber::*;
