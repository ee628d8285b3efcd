//! `kura completions SHELL` and `kura man DIR`: the shell completion scripts (clap_complete)
//! and manual pages (clap_mangen), generated from the same argument grammar as `--help`, so
//! that they cannot fall behind it.

use std::io::Write;
use std::path::Path;

use clap_complete::Shell;

use super::write_error;

/// Prints the completion script of `shell` to standard output.
pub fn completions(mut command: clap::Command, shell: Shell) -> kura::Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "kura", &mut out);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&out).and_then(|()| stdout.flush()).map_err(write_error("stdout"))
}

/// Writes `kura.1` and one `kura-NAME.1` per subcommand into `dir`, then prints their paths.
pub fn man_pages(command: clap::Command, dir: &Path) -> kura::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| kura::Error::io(dir.display().to_string(), e))?;
    let mut command = command;
    // Built first, so that every subcommand carries the global options and its full name.
    command.build();
    let mut written = Vec::new();
    write_page(&command, dir, &mut written)?;
    for sub in command.get_subcommands().filter(|sub| sub.get_name() != "help") {
        write_page(sub, dir, &mut written)?;
    }
    for path in written {
        super::print_line(path.display())?;
    }
    Ok(())
}

/// One page, named as clap_mangen titles it: after the built command's display name, which
/// for a subcommand is `kura-NAME` (the git convention `man kura-import` expects).
fn write_page(command: &clap::Command, dir: &Path, written: &mut Vec<std::path::PathBuf>) -> kura::Result<()> {
    let name = command.get_display_name().unwrap_or_else(|| command.get_name()).to_string();
    let mut text = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut text)
        .map_err(|e| kura::Error::io(format!("rendering {name}.1"), e))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, text).map_err(|e| kura::Error::io(path.display().to_string(), e))?;
    written.push(path);
    Ok(())
}
