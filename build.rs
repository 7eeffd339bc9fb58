// sqlx::migrate! embeds the migrations at compile time; rebuild when they change.
// HEADROOM_SKIP_BROWSER=1 at build time marks the real-browser tests ignored (reported as
// such by the test runner, never as passed), for machines that cannot have chromium;
// HEADROOM_SKIP_YUBABA=1 does the same for the test that runs the real yubaba, for machines
// that cannot build it, and HEADROOM_SKIP_POSTGRES=1 for the PostgreSQL tests on machines
// without Debian's postgresql (scripts/test.sh refuses all three in CI).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo::rustc-check-cfg=cfg(headroom_skip_browser)");
    println!("cargo:rerun-if-env-changed=HEADROOM_SKIP_BROWSER");
    if std::env::var_os("HEADROOM_SKIP_BROWSER").is_some() {
        println!("cargo:rustc-cfg=headroom_skip_browser");
    }
    println!("cargo::rustc-check-cfg=cfg(headroom_skip_postgres)");
    println!("cargo:rerun-if-env-changed=HEADROOM_SKIP_POSTGRES");
    if std::env::var_os("HEADROOM_SKIP_POSTGRES").is_some() {
        println!("cargo:rustc-cfg=headroom_skip_postgres");
    }
    println!("cargo::rustc-check-cfg=cfg(headroom_skip_yubaba)");
    println!("cargo:rerun-if-env-changed=HEADROOM_SKIP_YUBABA");
    if std::env::var_os("HEADROOM_SKIP_YUBABA").is_some() {
        println!("cargo:rustc-cfg=headroom_skip_yubaba");
    }
}
