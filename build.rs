//! Build script. With the `ffi` feature it compiles the cxx bridges (`src/ffi/`) and the C++
//! glue (`cpp/*.cpp`, against the public headers in `include/`) into this crate, so the Rust
//! staticlib `libpatchbox.a` is the whole C++ library: CMake links just that archive. Without
//! the feature it compiles no C++, and a pure-Rust build needs no C++ toolchain.
//!
//! The C++ compiler and flags come from the `cc` crate's usual variables (`CXX`, `CXXFLAGS`);
//! CMake sets them to its own compiler and, with `PATCHBOX_SANITIZE`, the sanitizer flags.
//!
//! A build with the bundled SQLite (feature `bundled-sqlite`, on by default) also checks that
//! it is compiled with its session extension (see [`sqlite_session`]): without it the library
//! would fail to link with undefined `sqlite3session_*` symbols, far from the cause.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Only the bundled SQLite is compiled here; a system libsqlite3 brings its own options.
    if std::env::var_os("CARGO_FEATURE_BUNDLED_SQLITE").is_some() {
        sqlite_session::require();
    }
    #[cfg(feature = "ffi")]
    cpp::build();
}

/// The `transaction_rollback` plan strategy calls SQLite's session extension
/// (`sqlite3session_*`, `sqlite3changeset_*`) through `rusqlite::ffi`. libsqlite3-sys's
/// prebuilt bindings declare those functions, but its bundled SQLite only compiles them with
/// `SQLITE_ENABLE_SESSION` and `SQLITE_ENABLE_PREUPDATE_HOOK`, which it takes from the
/// environment variable `LIBSQLITE3_FLAGS` (rusqlite's own `session` feature would set them
/// too, but it regenerates the bindings with bindgen, which needs libclang). This
/// repository's `.cargo/config.toml` sets the variable; a crate depending on patchbox does
/// not read that file and has to set it in its own.
mod sqlite_session {
    const VAR: &str = "LIBSQLITE3_FLAGS";
    const NEEDED: [&str; 2] = ["SQLITE_ENABLE_SESSION", "SQLITE_ENABLE_PREUPDATE_HOOK"];

    /// The macros `flags` leaves defined, read the way libsqlite3-sys's build script reads
    /// them: whitespace-separated `-DNAME[=value]`, `-UNAME` or `SQLITE_NAME[=value]`, in
    /// order (a later `-U` undefines).
    fn defined(flags: &str) -> Vec<&str> {
        let mut on: Vec<&str> = Vec::new();
        for flag in flags.split_whitespace() {
            let (undef, rest) = if let Some(r) = flag.strip_prefix("-D") {
                (false, r)
            } else if let Some(r) = flag.strip_prefix("-U") {
                (true, r)
            } else {
                (false, flag)
            };
            let name = rest.split('=').next().unwrap_or(rest);
            on.retain(|n| *n != name);
            if !undef {
                on.push(name);
            }
        }
        on
    }

    /// Fails the build, saying what to set, unless `LIBSQLITE3_FLAGS` enables the session
    /// extension.
    pub fn require() {
        println!("cargo:rerun-if-env-changed={VAR}");
        let flags = std::env::var(VAR).unwrap_or_default();
        let on = defined(&flags);
        let missing: Vec<&str> = NEEDED.into_iter().filter(|m| !on.contains(m)).collect();
        if missing.is_empty() {
            return;
        }
        let now = if flags.trim().is_empty() {
            "is not set".to_string()
        } else {
            format!("is \"{flags}\"")
        };
        let msg = format!(
            "patchbox needs SQLite's session extension, and {VAR} {now} (missing: {}). \
             Set it in the .cargo/config.toml of the project you build from (a crate depending \
             on patchbox does not read patchbox's own):\n\n    [env]\n    {VAR} = \
             \"-DSQLITE_ENABLE_SESSION -DSQLITE_ENABLE_PREUPDATE_HOOK\"\n\n\
             or in the environment (`{VAR}=\"-DSQLITE_ENABLE_SESSION \
             -DSQLITE_ENABLE_PREUPDATE_HOOK\" cargo build`, e.g. for `cargo install --git`). \
             Keep any other flags you pass in it.",
            missing.join(", ")
        );
        println!(
            "cargo:warning=patchbox: {VAR} does not enable {} (SQLite's session extension); \
             see the build script's error for what to set",
            missing.join(", ")
        );
        panic!("{msg}");
    }
}

#[cfg(feature = "ffi")]
mod cpp {
    use std::path::PathBuf;

    pub fn build() {
        let mut glue: Vec<PathBuf> = std::fs::read_dir("cpp")
            .expect("list cpp/")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
            .collect();
        glue.sort();
        cxx_build::bridges([
            "src/ffi/apply.rs",
            "src/ffi/error.rs",
            "src/ffi/fs_utils.rs",
            "src/ffi/plan.rs",
            "src/ffi/sandbox.rs",
            "src/ffi/store.rs",
        ])
        .files(&glue)
        .include("include")
        .include("include/patchbox/compat")
        .std("c++17")
        .flag_if_supported("-Wall")
        .flag_if_supported("-Wextra")
        .compile("patchbox-cxx");
        for p in ["src/ffi", "cpp", "include"] {
            println!("cargo:rerun-if-changed={p}");
        }
        println!("cargo:rerun-if-env-changed=CXXFLAGS");
        println!("cargo:rerun-if-env-changed=CXX");
    }
}
