//! The library answers to the name MPICH programs are linked against.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpich.so.12");
}
