//! Build script. With the `ffi` feature it compiles the cxx bridges (`src/ffi/`) and the C++
//! glue (`cpp/*.cpp`, against the public headers in `include/`) into this crate, so the Rust
//! staticlib `libpatchbox.a` is the whole C++ library: CMake links just that archive. Without
//! the feature it does nothing, and a pure-Rust build needs no C++ toolchain.
//!
//! The C++ compiler and flags come from the `cc` crate's usual variables (`CXX`, `CXXFLAGS`);
//! CMake sets them to its own compiler and, with `PATCHBOX_SANITIZE`, the sanitizer flags.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "ffi")]
    cpp::build();
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
