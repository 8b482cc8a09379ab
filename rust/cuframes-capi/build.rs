//! Gives the shared library its SONAME, so that programs linked against the
//! installed `libcuframes.so` record the versioned name. The SONAME names a
//! series of compatible versions by Cargo's rule: `libcuframes.so.<major>`
//! from 1.0, `libcuframes.so.0.<minor>` before (0.1 and 0.2 are
//! incompatible), so a program never loads a library of another series
//! (docs/c-api.md, "ABI policy"). scripts/install.sh names the links the
//! same way. (The header is not generated here: see `scripts/gen-header.sh`.)

fn main() {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| "0".to_owned());
    let major = var("CARGO_PKG_VERSION_MAJOR");
    let series = if major == "0" {
        format!("0.{}", var("CARGO_PKG_VERSION_MINOR"))
    } else {
        major
    };
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libcuframes.so.{series}");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
