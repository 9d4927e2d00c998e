//! The README's tour runs as written, against the real binary: every command of its `sh`
//! blocks in order, every `text` block after one compared with the last command's output, and
//! the `ferry shell` session fed to a shell. A command with a comment `# ferry: ...` must fail
//! with that message; any other command must succeed.
//!
//! The tour's default addresses (`127.0.0.1:6730`, `127.0.0.1:6731`) are replaced with the test
//! broker's; commands that build or start Ferry itself are left to the test.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::Path;
use std::process::{Command, Stdio};

use ferry_testkit::{ferry_bin, BinaryServer};

/// A fenced block of the README: its language, its lines, and the paragraph before it.
struct Block {
    lang: String,
    lines: Vec<String>,
    before: String,
}

fn blocks(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    // The paragraph being read, and the last one finished (a blank line ends one).
    let (mut paragraph, mut previous) = (String::new(), String::new());
    for line in readme.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            match current.take() {
                Some(b) => out.push(b),
                None => {
                    let before = if paragraph.trim().is_empty() {
                        &previous
                    } else {
                        &paragraph
                    };
                    current = Some(Block {
                        lang: lang.trim().to_owned(),
                        lines: Vec::new(),
                        before: before.trim().to_owned(),
                    })
                }
            }
            paragraph.clear();
            previous.clear();
            continue;
        }
        match &mut current {
            Some(b) => b.lines.push(line.to_owned()),
            None if line.trim().is_empty() => {
                if !paragraph.trim().is_empty() {
                    previous = std::mem::take(&mut paragraph);
                }
            }
            None => {
                paragraph.push(' ');
                paragraph.push_str(line);
            }
        }
    }
    out
}

/// The tour: the blocks from "A five-minute tour" to the next section.
fn tour(readme: &str) -> &str {
    let start = readme
        .find("## A five-minute tour")
        .expect("the tour section");
    let rest = &readme[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

/// Lines of an `sh` block with continuations joined.
fn commands(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in lines {
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        pending.push_str(line);
        let cmd = std::mem::take(&mut pending);
        if !cmd.trim().is_empty() {
            out.push(cmd.trim().to_owned());
        }
    }
    out
}

/// The message a command's comment says it fails with (`# ferry: ...`).
fn expected_failure(cmd: &str) -> Option<&str> {
    let (_, comment) = cmd.rsplit_once("   # ")?;
    comment.trim().starts_with("ferry:").then(|| comment.trim())
}

struct Run {
    status: bool,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, env: &[(&str, String)], script: &str, stdin: Option<&str>) -> Run {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(script)
        .current_dir(dir)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("bash");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Run {
        status: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Lines compared: trailing spaces dropped; a time stamp stands for any time stamp.
fn normalised(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let l = l.trim_end();
            match l.strip_prefix("created_at:") {
                Some(_) => "created_at: (a time)".to_owned(),
                None => l.to_owned(),
            }
        })
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_readme_tour_runs_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let server = BinaryServer::start(&[]).expect("ferry serve starts (cargo build -p ferry)");
    let addr = server.addr().to_string();
    let http = server.http_addr().expect("HTTP on").to_string();
    let bin_dir = ferry_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [
        ("PATH", path),
        ("FERRY_SERVER", addr.clone()),
        ("FERRY_HTTP", http.clone()),
    ];
    let work = tempfile::tempdir().unwrap();
    let place = |s: &str| {
        s.replace("127.0.0.1:6731", &http)
            .replace("127.0.0.1:6730", &addr)
    };
    let mut last: Option<Run> = None;
    let mut ran = 0;
    for block in blocks(tour(&readme)) {
        match block.lang.as_str() {
            "sh" => {
                for cmd in commands(&block.lines) {
                    // The tour's build and the broker itself are the test's.
                    if cmd.starts_with("cargo ") || cmd.starts_with("ferry serve") {
                        continue;
                    }
                    let script = place(&cmd);
                    let r = run(work.path(), &env, &script, None);
                    match expected_failure(&cmd) {
                        Some(message) => {
                            assert!(!r.status, "`{cmd}` should fail");
                            assert!(
                                r.stderr.trim() == message,
                                "`{cmd}` fails with\n{}\nnot\n{message}",
                                r.stderr.trim()
                            );
                        }
                        None => assert!(r.status, "`{cmd}` failed:\n{}{}", r.stdout, r.stderr),
                    }
                    ran += 1;
                    last = Some(r);
                }
            }
            "text" if block.before.ends_with("`ferry shell`:") => {
                // A shell session: fed to `ferry shell`; each `# ...` comment is what that line
                // prints.
                let mut input = String::new();
                let mut expected = Vec::new();
                for line in &block.lines {
                    let (command, comment) = match line.split_once('#') {
                        Some((c, e)) => (c.trim_end(), Some(e.trim())),
                        None => (line.as_str(), None),
                    };
                    input.push_str(command);
                    input.push('\n');
                    expected.extend(comment.map(str::to_owned));
                }
                let r = run(work.path(), &env, "ferry shell", Some(&input));
                assert!(
                    r.status,
                    "the shell session failed:\n{}{}",
                    r.stdout, r.stderr
                );
                assert!(
                    r.stderr.is_empty(),
                    "the shell session reports errors:\n{}{}",
                    r.stdout,
                    r.stderr
                );
                let printed = r
                    .stdout
                    .lines()
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>();
                for e in expected {
                    assert!(
                        printed.contains(&e),
                        "the shell session does not print `{e}`:\n{}{}",
                        r.stdout,
                        r.stderr
                    );
                }
                ran += 1;
            }
            "text" => {
                let r = last.as_ref().expect("a text block after a command");
                assert_eq!(
                    normalised(&r.stdout),
                    normalised(&block.lines.join("\n")),
                    "the output before this text block differs from the README (after: {})",
                    block.before
                );
            }
            other => panic!("a `{other}` block in the tour"),
        }
    }
    assert!(ran > 30, "only {ran} commands ran: the tour was not found");
}
