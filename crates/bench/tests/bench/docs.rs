//! The benchmark page and its results files: every harness result committed under
//! `docs/benchmarks/results/` validates against the schema (and so records its environment),
//! every other results file (a crate's own benchmark) names the command that wrote it, and
//! every figure in the page's tables names its results file, which exists, and the page stays
//! short enough to read in half a minute.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::schema;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_results_validate_against_the_schema() {
    let dir = repo().join("docs/benchmarks/results");
    let root = schema::load();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if json.get("workload").is_some() {
            // The harness's own result.
            let errors = schema::validate(&root, &json);
            assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        } else {
            assert!(
                json["command"].as_str().is_some_and(|c| !c.is_empty()),
                "{}: a results file not from ferry-bench must name its command",
                path.display()
            );
        }
    }
}

#[test]
fn every_figure_names_its_results_file() {
    let page = std::fs::read_to_string(repo().join("docs/benchmarks.md")).unwrap();
    let mut rows = 0;
    for line in page.lines() {
        // Table rows with a figure: the last column is the results file.
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        if !line.starts_with('|') || line.starts_with("|---") || cells.len() < 3 {
            continue;
        }
        let last = cells.last().map(|c| c.trim()).unwrap_or_default();
        if last == "results file" {
            continue;
        }
        rows += 1;
        let target = last
            .split("](")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or_else(|| panic!("no results file named in: {line}"));
        assert!(
            target.starts_with("benchmarks/results/") && target.ends_with(".json"),
            "{target}: results files live in docs/benchmarks/results/"
        );
        assert!(
            repo().join("docs").join(target).is_file(),
            "{target} named by the page does not exist"
        );
    }
    assert!(rows >= 5, "the page's tables were not found ({rows} rows)");
}

/// The page is a summary a reader takes in quickly: the dated runs and long explanations belong
/// in the log.
#[test]
fn the_page_stays_about_300_lines() {
    let page = std::fs::read_to_string(repo().join("docs/benchmarks.md")).unwrap();
    let lines = page.lines().count();
    assert!(
        lines <= 320,
        "docs/benchmarks.md has {lines} lines: move explanations to docs/benchmarks/log.md"
    );
}
