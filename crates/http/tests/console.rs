//! The web console in a real headless Chromium against the real binary: `support/console.py`
//! (Playwright over Debian's `chromium`; `scripts/test` installs both) creates queues in the
//! UI, sends with the CLI and watches the depth change without reloading, browses, redrives a
//! dead letter and force-disconnects a client.
//!
//! `FERRY_SCREENSHOTS=DIR` saves screenshots of the console's pages there (the ones in
//! `docs/images/` are made so).

mod common;

use std::process::Command;

#[test]
fn the_console_works_in_a_real_browser() {
    let server = common::start();
    let url = format!("http://{}", server.http_addr().expect("HTTP on"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/console.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script)
        .arg("--url")
        .arg(&url)
        .arg("--server")
        .arg(server.addr().to_string())
        .arg("--ferry")
        .arg(ferry_testkit::ferry_bin());
    if let Ok(dir) = std::env::var("FERRY_SCREENSHOTS") {
        cmd.arg("--shots").arg(dir);
    }
    let out = cmd
        .output()
        .expect("python3 runs (scripts/test installs it with playwright and chromium)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'playwright'"),
        "playwright is missing: pip install playwright (scripts/test does)"
    );
    assert!(
        out.status.success(),
        "the console test failed\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("every step passed"), "{stdout}");
}
