// sqlx::migrate! embeds the migrations at compile time; rebuild when they change.
// HEADROOM_SKIP_BROWSER=1 at build time marks the real-browser tests ignored (reported as
// such by the test runner, never as passed), for machines that cannot have chromium.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo::rustc-check-cfg=cfg(headroom_skip_browser)");
    println!("cargo:rerun-if-env-changed=HEADROOM_SKIP_BROWSER");
    if std::env::var_os("HEADROOM_SKIP_BROWSER").is_some() {
        println!("cargo:rustc-cfg=headroom_skip_browser");
    }
}
