//! Structs that can grow (docs/c-api.md, "ABI policy").
//!
//! Every struct of the C API begins with `uint32_t struct_size`: the size of
//! the struct as the caller's header declares it. The library never reads
//! or writes a caller's struct as a whole `T`, only as many bytes as
//! `struct_size` covers, so a program built against an older header (a
//! shorter struct) or a newer one (a longer struct) works with this library:
//!
//! - **in** (configs, frame properties): the covered bytes are read over the
//!   `_init` defaults, so the fields a shorter struct lacks keep their
//!   defaults; the bytes past this library's struct must be zero (fields of a
//!   newer header that were left unset; one that is set is refused, never
//!   ignored). [`read_in`]
//! - **out** (stream info, frame info, stats, ...): at most `struct_size`
//!   bytes are written, and the `struct_size` written says how many (this
//!   library's size when the caller's struct is longer: its tail is left as
//!   it was). [`out_size`], [`write_out`]
//! - **init** (`cuframes_*_config_init_sized`): the defaults, `struct_size`
//!   set to the caller's size, and the bytes past this library's struct
//!   zeroed. [`init`]
//!
//! A `struct_size` of 0, smaller than the struct's first layout, between two
//! published layouts, or above [`STRUCT_SIZE_MAX`] is `INVALID_ARGUMENT`.
//!
//! Generic over [`Growable`], knowing no struct of the API: each struct's
//! module implements it next to the struct (its published layouts,
//! `SIZES`) and checks it with `assert_growable` in its tests.

use std::mem::{MaybeUninit, size_of};

use cuframes::Result;

use crate::error::invalid;
use crate::ffi::check_out;

/// The largest `struct_size` accepted: far beyond any struct of the API, so
/// a larger one is an unset field, not a struct (and a newer struct's
/// unknown tail, which must be read to be checked, stays bounded).
pub(crate) const STRUCT_SIZE_MAX: usize = 4096;

/// A struct that crosses the ABI with a leading `struct_size`.
///
/// # Safety
///
/// Implementors are `#[repr(C)]`, their first field is `struct_size: u32`,
/// every field accepts every bit pattern (integers, raw pointers, optional
/// function pointers, arrays of them: bytes copied from C make a valid
/// value), and the last field ends at
/// `size_of::<Self>()`: no tail padding, so that a field appended later lies
/// past the old size and never in its padding (the struct's module tests
/// it with `assert_growable`).
pub(crate) unsafe trait Growable: Copy {
    /// The C name, for messages.
    const NAME: &'static str;
    /// The sizes of its published layouts, oldest first; the last is
    /// `size_of::<Self>()`. When fields are appended, the previous layout's
    /// size is `offset_of!(Self, first new field)`: insert it before
    /// `size_of::<Self>()`, and never remove one.
    const SIZES: &'static [usize];
}

/// Sets the `struct_size` of a value.
fn set_struct_size<T: Growable>(value: &mut T, size: usize) {
    debug_assert!(size <= STRUCT_SIZE_MAX);
    // SAFETY: `struct_size: u32` is the first field of a repr(C) T (trait
    // contract), at offset 0 and aligned for u32 since T is.
    unsafe { (value as *mut T).cast::<u32>().write(size as u32) }
}

/// Checks a size the caller gave for a `T`; `what` names it in messages.
fn check_size<T: Growable>(size: usize, what: &str) -> Result<usize> {
    let name = T::NAME;
    let first = T::SIZES[0];
    let known = size_of::<T>();
    if size == 0 {
        return Err(invalid(format!(
            "{what} is 0: set it to sizeof({name}) (docs/c-api.md, \"ABI policy\")"
        )));
    }
    if size > STRUCT_SIZE_MAX {
        return Err(invalid(format!(
            "{what} {size} is larger than any cuframes struct: set it to sizeof({name})"
        )));
    }
    if size < first {
        return Err(invalid(format!(
            "{what} {size} is smaller than the first layout of {name} ({first} bytes): \
             the struct lacks fields this library needs; build against a cuframes.h with struct_size"
        )));
    }
    if size < known && !T::SIZES.contains(&size) {
        return Err(invalid(format!(
            "{what} {size} is not the size of a published layout of {name} ({:?}, or more from a newer cuframes.h)",
            T::SIZES
        )));
    }
    Ok(size)
}

/// The checked `struct_size` of the caller's struct at `ptr` (NULL and
/// misaligned pointers are refused first). For out-parameters, call it
/// before any work, like `check_out`.
///
/// # Safety
///
/// `ptr` is NULL or points to at least 4 readable bytes (the caller's struct).
pub(crate) unsafe fn caller_size<T: Growable>(ptr: *const T, what: &str) -> Result<usize> {
    check_out(ptr.cast_mut(), what)?;
    // SAFETY: non-NULL and aligned for T, hence for u32 (checked); struct_size
    // is its first 4 bytes (contract).
    let size = unsafe { ptr.cast::<u32>().read() } as usize;
    check_size::<T>(size, &format!("{what}->struct_size"))
}

/// [`caller_size`] for an out-parameter.
///
/// # Safety
///
/// As for [`caller_size`].
pub(crate) unsafe fn out_size<T: Growable>(ptr: *mut T, what: &str) -> Result<usize> {
    // SAFETY: forwarded.
    unsafe { caller_size(ptr.cast_const(), what) }
}

/// Reads the caller's struct: the bytes its `struct_size` covers, over
/// `defaults` (the fields an older, shorter struct lacks keep them). Bytes
/// past this library's struct must be zero.
///
/// # Safety
///
/// `ptr` is NULL or points to a struct of `struct_size` readable bytes.
pub(crate) unsafe fn read_in<T: Growable>(ptr: *const T, what: &str, defaults: T) -> Result<T> {
    // SAFETY: forwarded from this function's contract.
    let size = unsafe { caller_size(ptr, what) }?;
    let known = size_of::<T>();
    if size > known {
        // SAFETY: the caller's struct has `size` readable bytes (contract).
        let tail = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>().add(known), size - known) };
        if let Some(at) = tail.iter().position(|&byte| byte != 0) {
            return Err(invalid(format!(
                "{what} sets byte {} of its {size}: past the {known} bytes of {} this library ({}) knows, \
                 so a field of a newer cuframes.h; use a libcuframes that has it, or leave it zero",
                known + at,
                T::NAME,
                env!("CARGO_PKG_VERSION")
            )));
        }
    }
    let mut value = MaybeUninit::new(defaults);
    // SAFETY: `min(size, known)` bytes are readable at `ptr` (contract) and
    // writable in `value`; they do not overlap. Any bytes make a valid T
    // (trait contract), so `value` stays initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), value.as_mut_ptr().cast::<u8>(), size.min(known));
        Ok(value.assume_init())
    }
}

/// Writes `value` into the caller's struct of `size` bytes (from
/// [`out_size`]): its first `min(size, size_of::<T>())` bytes, with
/// `struct_size` set to that count. The rest of a longer struct is left
/// untouched.
///
/// # Safety
///
/// `ptr` passed [`out_size`], which returned `size`, and the struct is writable.
pub(crate) unsafe fn write_out<T: Growable>(ptr: *mut T, size: usize, value: T) {
    // SAFETY: forwarded.
    unsafe { write_bytes_of(ptr.cast::<u8>(), size, value) }
}

/// [`write_out`] to an address that need not be aligned for `T` (an array
/// element at a caller-given stride).
///
/// # Safety
///
/// `dst` is writable for `min(size, size_of::<T>())` bytes.
pub(crate) unsafe fn write_bytes_of<T: Growable>(dst: *mut u8, size: usize, mut value: T) {
    let count = size.min(size_of::<T>());
    set_struct_size(&mut value, count);
    // SAFETY: `count` bytes of `value` are readable (an untyped copy, so its
    // padding may be copied uninitialised) and writable at `dst` (contract).
    unsafe { std::ptr::copy_nonoverlapping((&raw const value).cast::<u8>(), dst, count) }
}

/// `_config_init_sized`: writes `value` (the defaults) into the caller's
/// struct of `size` bytes, `struct_size` set to `size`, and zeroes the
/// bytes past this library's struct (a newer header's fields: unset).
///
/// # Safety
///
/// `ptr` is NULL or writable for `size` bytes.
pub(crate) unsafe fn init<T: Growable>(ptr: *mut T, size: usize, what: &str, mut value: T) -> Result<()> {
    check_out(ptr, what)?;
    let size = check_size::<T>(size, "size")?;
    let known = size_of::<T>();
    set_struct_size(&mut value, size);
    let count = size.min(known);
    // SAFETY: `ptr` is writable for `size` bytes (contract): `count` bytes of
    // `value` (an untyped copy), then zeroes up to `size`.
    unsafe {
        std::ptr::copy_nonoverlapping((&raw const value).cast::<u8>(), ptr.cast::<u8>(), count);
        std::ptr::write_bytes(ptr.cast::<u8>().add(count), 0, size - count);
    }
    Ok(())
}

/// What [`Growable`] promises of `T`, for the tests of the struct's module:
/// `struct_size` first (`struct_size_at`, its `offset_of!`, is 0), no tail
/// padding (`last_field_end`, the `offset_of!` of the last field plus its
/// size, is the struct's size), and `SIZES` sorted, the newest layout last.
#[cfg(test)]
pub(crate) fn assert_growable<T: Growable>(struct_size_at: usize, last_field_end: usize) {
    let name = T::NAME;
    assert_eq!(struct_size_at, 0, "{name}: struct_size is not its first field");
    assert_eq!(
        last_field_end,
        size_of::<T>(),
        "{name}: tail padding after its last field"
    );
    assert_eq!(
        T::SIZES.last(),
        Some(&size_of::<T>()),
        "{name}: SIZES must end at its size"
    );
    assert!(T::SIZES.is_sorted(), "{name}: SIZES must be oldest first");
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    /// A struct with two published layouts: v1 ends before `c`, v2 added it.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Toy {
        struct_size: u32,
        a: u32,
        b: u64,
        c: u64,
    }

    // SAFETY: repr(C), struct_size first, plain integers, no tail padding.
    unsafe impl Growable for Toy {
        const NAME: &'static str = "toy";
        const SIZES: &'static [usize] = &[offset_of!(Toy, c), size_of::<Toy>()];
    }

    const DEFAULTS: Toy = Toy {
        struct_size: 0,
        a: 1,
        b: 2,
        c: 3,
    };

    /// A newer header's Toy: one more field.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    struct NewerToy {
        toy: Toy,
        d: u64,
    }

    fn message(error: cuframes::Error) -> String {
        error.message().to_owned()
    }

    #[test]
    fn sizes_zero_too_small_between_and_huge_are_refused() {
        for (size, mentions) in [
            (0, "is 0: set it to sizeof(toy)"),
            (4, "smaller than the first layout of toy (16 bytes)"),
            (20, "not the size of a published layout of toy ([16, 24]"),
            (4097, "larger than any cuframes struct"),
        ] {
            let toy = Toy {
                struct_size: size,
                ..DEFAULTS
            };
            // SAFETY: a valid Toy (the larger sizes are refused before any read past it).
            let error = unsafe { read_in(&toy, "toy", DEFAULTS) }.unwrap_err();
            assert_eq!(error.kind(), cuframes::ErrorKind::InvalidArgument);
            assert!(message(error.clone()).contains(mentions), "{size}: {error}");
            let mut out = toy;
            // SAFETY: as above.
            assert!(unsafe { out_size(&mut out, "toy_out") }.is_err());
            // SAFETY: writable for the size when accepted; these are refused.
            assert!(unsafe { init(&mut out, size as usize, "toy", DEFAULTS) }.is_err());
            assert_eq!(out, toy, "{size}: written though refused");
        }
        // SAFETY: NULL is refused first.
        let error = unsafe { read_in(std::ptr::null::<Toy>(), "toy", DEFAULTS) }.unwrap_err();
        assert!(message(error).contains("toy is NULL"));
    }

    #[test]
    fn an_older_struct_reads_its_fields_and_defaults_the_rest() {
        // v1: 16 bytes; `c` lies past them (here: junk the library must not read).
        let old = Toy {
            struct_size: 16,
            a: 10,
            b: 20,
            c: 0xDEAD,
        };
        // SAFETY: a valid Toy (at least its first 16 bytes readable).
        let read = unsafe { read_in(&old, "toy", DEFAULTS) }.unwrap();
        assert_eq!(
            read,
            Toy {
                struct_size: 16,
                a: 10,
                b: 20,
                c: 3
            }
        );
        // Out: only the 16 bytes, struct_size 16; `c` untouched.
        let mut out = Toy {
            struct_size: 16,
            a: 0,
            b: 0,
            c: 0xBEEF,
        };
        // SAFETY: a writable Toy.
        let size = unsafe { out_size(&mut out, "toy_out") }.unwrap();
        // SAFETY: checked by out_size.
        unsafe {
            write_out(
                &mut out,
                size,
                Toy {
                    struct_size: 0,
                    a: 7,
                    b: 8,
                    c: 9,
                },
            )
        };
        assert_eq!(
            out,
            Toy {
                struct_size: 16,
                a: 7,
                b: 8,
                c: 0xBEEF
            }
        );
        // Init of a v1 struct: 16 bytes.
        let mut fresh = Toy {
            struct_size: 0,
            a: 0,
            b: 0,
            c: 0xBEEF,
        };
        // SAFETY: writable for 16 bytes.
        unsafe { init(&mut fresh, 16, "toy", DEFAULTS) }.unwrap();
        assert_eq!(
            fresh,
            Toy {
                struct_size: 16,
                a: 1,
                b: 2,
                c: 0xBEEF
            }
        );
    }

    #[test]
    fn a_newer_struct_needs_its_unknown_tail_zero() {
        let size = size_of::<NewerToy>() as u32;
        let mut newer = NewerToy {
            toy: Toy {
                struct_size: size,
                a: 5,
                b: 6,
                c: 7,
            },
            d: 0,
        };
        let ptr = (&raw const newer).cast::<Toy>();
        // SAFETY: `size` readable bytes.
        let read = unsafe { read_in(ptr, "toy", DEFAULTS) }.unwrap();
        assert_eq!((read.a, read.b, read.c), (5, 6, 7));
        newer.d = 1 << 40;
        // SAFETY: as above.
        let error = unsafe { read_in((&raw const newer).cast::<Toy>(), "toy", DEFAULTS) }.unwrap_err();
        assert!(
            message(error.clone()).contains("toy sets byte 29 of its 32: past the 24 bytes of toy"),
            "{error}"
        );
        // Out: this library's 24 bytes, struct_size 24; `d` untouched.
        let ptr = (&raw mut newer).cast::<Toy>();
        // SAFETY: a writable NewerToy.
        let got = unsafe { out_size(ptr, "toy_out") }.unwrap();
        assert_eq!(got, 32);
        // SAFETY: checked.
        unsafe { write_out(ptr, got, DEFAULTS) };
        assert_eq!(
            newer.toy,
            Toy {
                struct_size: 24,
                ..DEFAULTS
            }
        );
        assert_eq!(newer.d, 1 << 40);
        // Init: struct_size 32, the unknown tail zeroed.
        // SAFETY: writable for 32 bytes.
        unsafe { init(ptr, 32, "toy", DEFAULTS) }.unwrap();
        assert_eq!(
            newer.toy,
            Toy {
                struct_size: 32,
                ..DEFAULTS
            }
        );
        assert_eq!(newer.d, 0);
    }

    #[test]
    fn the_toy_keeps_the_promises() {
        assert_growable::<Toy>(
            offset_of!(Toy, struct_size),
            offset_of!(Toy, c) + size_of::<u64>(),
        );
    }
}
