//! The real `ferry serve` binary: configuration layering, `--check-config`, the data-directory
//! lock, runtime.toml and graceful shutdown on SIGTERM. Needs `cargo build -p ferry` first.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::process::Command;

use common::*;
use ferry_client::Client;
use ferry_testkit::{ferry_bin, BinaryServer};

fn serve(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(ferry_bin());
    cmd.arg("serve").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run ferry")
}

/// The standard output of a run that must succeed (else its standard error says why not).
fn stdout_of_success(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn check_config_layers_file_env_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ferry.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:7000\"\nfsync = \"never\"\nlease_ms = 1000\nmax_connections = 5\n",
    )
    .unwrap();
    let out = serve(
        &[
            "--config",
            file.to_str().unwrap(),
            "--check-config",
            "--max-connections",
            "9",
        ],
        &[("FERRY_FSYNC", "interval:20"), ("FERRY_LEASE_MS", "2000")],
    );
    let text = stdout_of_success(&out);
    assert!(text.contains("listen = \"127.0.0.1:7000\""), "{text}");
    assert!(
        text.contains("fsync = \"interval:20\""),
        "env beats the file: {text}"
    );
    assert!(text.contains("lease_ms = 2000"), "{text}");
    assert!(
        text.contains("max_connections = 9"),
        "flags beat everything: {text}"
    );
}

#[test]
fn bad_configuration_is_one_clear_line_and_a_failure() {
    let out = serve(&["--check-config", "--fsync", "sometimes"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fsync") && err.contains("sometimes"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "lisen = 1\n").unwrap();
    let out = serve(&["--check-config", "--config", file.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("lisen"));
}

/// The log segment settings have flags too; they beat the environment, and a size out of
/// bounds is refused with the bounds.
#[test]
fn segment_flags_beat_the_environment_and_are_checked() {
    let out = serve(
        &[
            "--check-config",
            "--segment-bytes",
            "65536",
            "--spare-segments",
            "0",
        ],
        &[
            ("FERRY_SEGMENT_BYTES", "1048576"),
            ("FERRY_SPARE_SEGMENTS", "3"),
        ],
    );
    let text = stdout_of_success(&out);
    assert!(text.contains("\nsegment_bytes = 65536\n"), "{text}");
    assert!(text.contains("\nspare_segments = 0\n"), "{text}");
    let out = serve(&["--check-config", "--segment-bytes", "4096"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("segment_bytes") && err.contains("4096") && err.contains("65536"),
        "{err}"
    );
    for bad in ["lots", "-1"] {
        let out = serve(&["--check-config", "--spare-segments", bad], &[]);
        assert!(!out.status.success(), "--spare-segments {bad} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(bad), "{err}");
        assert!(
            out.stdout.is_empty(),
            "a refused flag printed a configuration"
        );
    }
}

#[test]
fn second_broker_on_the_same_data_dir_refuses_to_start() {
    let first = BinaryServer::start(&[]).unwrap();
    let out = serve(
        &[
            "--data-dir",
            first.data_dir().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another ferry process"), "{err}");
}

#[test]
fn sigterm_drains_flushes_and_keeps_messages() {
    let mut server = BinaryServer::start(&["--fsync", "never"]).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = server.addr().to_string();
    rt.block_on(async {
        let c = Client::connect(&addr, "alice").await.unwrap();
        c.create_queue("q").await.unwrap();
        for i in 0..100 {
            c.send(msg(&["q"], &i.to_string(), 5)).await.unwrap();
        }
    });
    let status = server.terminate().expect("exit status");
    assert!(status.success(), "graceful exit: {status:?}");
    assert!(
        !server.data_dir().join("runtime.toml").exists(),
        "runtime.toml is removed on a clean shutdown"
    );
    server.restart().unwrap();
    let addr = server.addr().to_string();
    rt.block_on(async {
        let c = Client::connect(&addr, "alice").await.unwrap();
        for i in 0..100 {
            assert_eq!(body(&take(&c, "q").await.unwrap()), i.to_string());
        }
        assert!(take(&c, "q").await.is_none());
    });
}

/// The `workers=N` of the broker's start-up log line, from a `ferry serve` run with `args`.
fn logged_workers(args: &[&str]) -> String {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(ferry_bin())
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("FERRY_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run ferry");
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut found = String::new();
    for line in stderr.lines() {
        let line = line.unwrap();
        if line.contains("ferry broker listening") {
            found = line
                .split_whitespace()
                .find(|w| w.starts_with("workers="))
                .unwrap_or("")
                .to_owned();
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    found
}

#[test]
fn workers_setting_sets_the_number_of_runtime_threads() {
    assert_eq!(logged_workers(&["--workers", "1"]), "workers=1");
    assert_eq!(logged_workers(&["--workers", "3"]), "workers=3");
    let out = serve(&["--check-config"], &[("FERRY_WORKERS", "2")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("workers = 2"));
    let out = serve(&["--check-config", "--workers", "0"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("workers"));
}
