//! `cca __engine` (hidden): runs an engine for cca and ends it when cca ends (`run::launch`);
//! `cca __standby` (hidden): keeps one waiting for the next one-shot turn (`run::standby`).

use anyhow::Result;

use crate::cli::EngineArgs;

/// `cca __engine PARENT -- PROGRAM ARGS...`
pub(crate) fn run(args: &EngineArgs) -> Result<u8> {
    crate::run::launch(args.parent, &args.command)
}

/// `cca __engine PARENT -- PROGRAM ARGS...` read without clap, as cca starts every engine so:
/// the parent and the command; `None` for any other command line (clap then reads it, and
/// says what is wrong with a launcher's that does not fit).
pub(crate) fn launcher_args(
    mut args: impl Iterator<Item = std::ffi::OsString>,
) -> Option<(u32, Vec<std::ffi::OsString>)> {
    let _cca = args.next()?;
    if args.next()? != "__engine" {
        return None;
    }
    let parent = args.next()?.to_str()?.parse().ok()?;
    if args.next()? != "--" {
        return None;
    }
    let command: Vec<_> = args.collect();
    (!command.is_empty()).then_some((parent, command))
}

/// `cca __standby`, its order on stdin.
pub(crate) fn standby() -> Result<()> {
    crate::run::standby::serve_stdin()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_s_arguments_are_read_as_clap_reads_them() {
        let words = |line: &str| line.split(' ').map(std::ffi::OsString::from).collect::<Vec<_>>();
        let (parent, command) = launcher_args(words("cca __engine 42 -- claude -p").into_iter())
            .expect("a launcher's command line");
        assert_eq!(parent, 42);
        assert_eq!(command, words("claude -p"));
        for other in [
            "cca search x",
            "cca __engine x -- claude",
            "cca __engine 42 claude",
            "cca __engine 42 --",
        ] {
            assert!(launcher_args(words(other).into_iter()).is_none(), "{other}");
        }
    }
}
