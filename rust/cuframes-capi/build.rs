//! Gives the shared library its SONAME, `libcuframes.so.<major>`, so that
//! programs linked against the installed `libcuframes.so` record the
//! versioned name. (The header is not generated here: see
//! `scripts/gen-header.sh`.)

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".to_owned());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libcuframes.so.{major}");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
