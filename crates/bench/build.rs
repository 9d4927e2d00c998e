//! Records the git commit the harness is built from (`FERRY_GIT_COMMIT`), for the `environment`
//! of its JSON reports: `git rev-parse --short=12 HEAD`, with `-dirty` when tracked files had
//! uncommitted changes at build time. Outside a git checkout (a source tarball) nothing is set
//! and the reports say `null`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // Rebuild when HEAD moves (a commit, a checkout) in this work tree.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/logs/HEAD");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return;
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let suffix = if dirty { "-dirty" } else { "" };
    println!("cargo:rustc-env=FERRY_GIT_COMMIT={commit}{suffix}");
}
