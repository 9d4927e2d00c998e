//! Where the shell's lines come from: a terminal, read with `rustyline` (line editing, a
//! history kept across sessions, Ctrl-C drops the line, Ctrl-D ends the shell), or a pipe, read
//! line by line without a prompt.
//!
//! rustyline blocks, so each terminal line is read on tokio's blocking pool; the editor goes
//! there and comes back with the line.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;
use tokio::io::{AsyncBufReadExt, BufReader, Stdin};

/// Most lines a history file keeps.
const HISTORY_LINES: usize = 1000;

/// A source of input lines.
pub enum Input {
    /// An interactive terminal.
    Terminal {
        /// The editor; `None` only while it reads a line on the blocking pool.
        editor: Option<DefaultEditor>,
        /// Where the history is loaded from and saved to.
        history: Option<PathBuf>,
    },
    /// Standard input that is not a terminal.
    Pipe(BufReader<Stdin>),
}

/// `~/.ferry_history`, when there is a home directory.
pub fn default_history() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".ferry_history"))
}

impl Input {
    /// Lines from standard input, which is not a terminal.
    pub fn pipe() -> Input {
        Input::Pipe(BufReader::new(tokio::io::stdin()))
    }

    /// Lines from the terminal, with the history in `history` (a missing or unreadable file
    /// starts an empty history). Falls back to [`Input::pipe`] when no editor can be made.
    pub fn terminal(history: Option<PathBuf>) -> Input {
        let config = rustyline::Config::builder()
            .max_history_size(HISTORY_LINES)
            .map(|b| b.auto_add_history(false).build())
            .unwrap_or_default();
        let Ok(mut editor) = DefaultEditor::with_config(config) else {
            return Input::pipe();
        };
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        Input::Terminal {
            editor: Some(editor),
            history,
        }
    }

    /// The next line (without its line break); `None` at the end of input.
    pub async fn next_line(&mut self, prompt: &str) -> Result<Option<String>> {
        match self {
            Input::Pipe(reader) => {
                let mut raw = Vec::new();
                if reader.read_until(b'\n', &mut raw).await? == 0 {
                    return Ok(None);
                }
                Ok(Some(String::from_utf8_lossy(&raw).into_owned()))
            }
            Input::Terminal { editor, .. } => loop {
                let mut ed = editor
                    .take()
                    .ok_or_else(|| anyhow!("the line editor is gone"))?;
                let prompt = prompt.to_string();
                let (ed, read) = tokio::task::spawn_blocking(move || {
                    let read = ed.readline(&prompt);
                    (ed, read)
                })
                .await?;
                let ed = editor.insert(ed);
                match read {
                    Ok(line) => {
                        if !line.trim().is_empty() {
                            let _ = ed.add_history_entry(line.as_str());
                        }
                        return Ok(Some(line));
                    }
                    // Ctrl-C drops the line being typed, as in a shell.
                    Err(ReadlineError::Interrupted) => continue,
                    Err(ReadlineError::Eof) => return Ok(None),
                    Err(e) => return Err(anyhow!("cannot read the terminal: {e}")),
                }
            },
        }
    }

    /// Saves the history of a terminal session (best effort: a shell that cannot write its
    /// history still did its work).
    pub fn close(&mut self) {
        if let Input::Terminal {
            editor: Some(ed),
            history: Some(path),
        } = self
        {
            let _ = ed.save_history(path);
        }
    }
}
