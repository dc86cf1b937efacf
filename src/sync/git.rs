//! The `git` program, driven for `cca sync`: the user's own git, so their remotes, SSH keys
//! and credential helpers work unchanged. Only what sync needs: a clone of one branch, commits
//! of this machine's logs, fetch, merge and push.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::error::{Failure, exit};
use crate::run::{self, Ran};

/// The branch of the remote that holds the logs: its own, so a repository on a forge can
/// hold other things on its default branch.
pub(crate) const BRANCH: &str = "cca";
const REMOTE_BRANCH: &str = "refs/remotes/origin/cca";

/// git, run in the sync repository.
pub(crate) struct Git {
    program: PathBuf,
    dir: PathBuf,
    /// Nobody is there to answer a password prompt: it fails instead of waiting.
    background: bool,
    /// Many records are on their way (a first sync): git looks for no deltas between them.
    pub bulk: bool,
}

/// What a push did.
#[derive(Debug, PartialEq)]
pub(crate) enum Pushed {
    Done,
    /// Another machine pushed first: fetch, merge and push again.
    Behind,
}

impl Git {
    pub(crate) fn new(dir: &Path, background: bool) -> Result<Git> {
        let program = which::which("git").map_err(|_| {
            Failure::new(exit::ERROR, "git not found on PATH: cca sync drives git")
                .hint("install git (https://git-scm.com), then run the command again")
        })?;
        Ok(Git { program, dir: dir.to_path_buf(), background, bulk: false })
    }

    /// Runs git with cca's settings for its own repository: commits by "cca" (no name or
    /// address of the user's reaches the remote), no hooks, no signing, no maintenance left
    /// running when cca is done, and no symbolic link checked out: a link someone pushed to
    /// the remote is a file holding its target's name, so that nothing cca writes in the
    /// clone can go through one to a file outside it (a transcript, anything of the user's).
    fn run(&self, args: &[&str]) -> Result<Ran> {
        let settings = [
            "-c",
            "user.name=cca",
            "-c",
            "user.email=cca@localhost",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=.git/no-hooks",
            "-c",
            "gc.autoDetach=false",
            "-c",
            "maintenance.autoDetach=false",
            "-c",
            "core.autocrlf=false",
            "-c",
            "core.symlinks=false",
        ];
        // Sealed records are random to git: looking for deltas among 10,000 of them (in the
        // push, and in the repacking a large commit starts) took minutes and found none.
        let bulk: &[&str] = if self.bulk { &["-c", "pack.window=0"] } else { &[] };
        let all: Vec<&OsStr> = settings.iter().chain(bulk).chain(args).map(OsStr::new).collect();
        let mut env = vec![("GIT_CONFIG_NOSYSTEM", "1"), ("LC_ALL", "C")];
        if self.background {
            // Nobody is there to answer: asking fails rather than waits. (The user's own
            // GIT_SSH_COMMAND is theirs to make batch.)
            env.push(("GIT_TERMINAL_PROMPT", "0"));
            if std::env::var_os("GIT_SSH_COMMAND").is_none() {
                env.push(("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"));
            }
        }
        run::run_in(&self.program, &self.dir, &all, &env)
    }

    /// Runs git and fails, with what git said, when it does.
    fn ok(&self, args: &[&str]) -> Result<String> {
        succeeded(args, self.run(args)?)
    }

    /// Removes the lock files a git killed with a killed sync left (`index.lock`,
    /// `HEAD.lock`, a branch's `.lock`...), which would fail every git after it. Call it
    /// holding the sync lock: then no other git of cca's runs here, and the guard ended
    /// the killed one's.
    pub(crate) fn clear_stale_locks(&self) {
        fn clear(dir: &Path, depth: usize) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "lock") {
                    let _ = std::fs::remove_file(&path);
                } else if depth > 0 && entry.file_type().is_ok_and(|t| t.is_dir()) {
                    clear(&path, depth - 1);
                }
            }
        }
        let git = self.dir.join(".git");
        clear(&git, 0);
        clear(&git.join("refs"), 3);
    }

    /// A new repository in the folder, with `remote` as its origin.
    pub(crate) fn create(&self, remote: &str) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        self.ok(&["init", "-q", "-b", BRANCH])?;
        // `--`: a remote that starts with `-` is a name, never an option of git's.
        self.ok(&["remote", "add", "--", "origin", remote])?;
        Ok(())
    }

    /// Fetches the remote's branch. An unreachable remote is an error saying so; nothing has
    /// changed here.
    pub(crate) fn fetch(&self) -> Result<()> {
        let refspec = format!("+refs/heads/{BRANCH}:{REMOTE_BRANCH}");
        let ran = self.run(&["fetch", "-q", "--no-tags", "origin", &refspec])?;
        if ran.success {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&ran.stderr);
        // A new, empty remote has no branch yet: nothing to take. Neither has one emptied or
        // made again since the last fetch: what was fetched from it then is forgotten, so that
        // this machine's branch, which holds all of it, is pushed there again.
        if said.contains("couldn't find remote ref") {
            if self.remote_head().is_some() {
                self.ok(&["update-ref", "-d", REMOTE_BRANCH])?;
            }
            return Ok(());
        }
        // The remote answered, and writing what it sent failed here (a full disk, a limit on
        // a file's size): not a matter of the address or access.
        let here = ["No space left", "died of signal", "write error", "unable to write"];
        if here.iter().any(|h| said.contains(h)) {
            return Err(Failure::new(
                exit::ERROR,
                format!("cannot write what the remote sent into {}: {}", self.dir.display(), said.trim()),
            )
            .hint("check the free space (and any limit on a file's size) where CCA_HOME is; nothing here was changed; once that is put right, the same command again does it all")
            .into());
        }
        let remote =
            self.ok(&["remote", "get-url", "origin"]).unwrap_or_default().trim().to_string();
        Err(Failure::new(exit::ERROR, format!("cannot reach the remote {remote}: {}", said.trim()))
            .hint("check the address and your access to it (`git ls-remote REMOTE`); nothing here was changed; once that is put right, the same command again does it all")
            .into())
    }

    /// The commit the remote's branch was at when last fetched, if it has one.
    pub(crate) fn remote_head(&self) -> Option<String> {
        self.ok(&["rev-parse", "-q", "--verify", REMOTE_BRANCH])
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Whether the remote's branch, as last fetched, holds this machine's last commit.
    pub(crate) fn contains_head(&self) -> bool {
        self.is_ancestor("HEAD", REMOTE_BRANCH)
    }

    /// This repository's own commit, if it has one.
    pub(crate) fn head(&self) -> Option<String> {
        self.ok(&["rev-parse", "-q", "--verify", "HEAD"])
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Whether `a` and `b` have a commit in common (one remote's history, however far apart).
    pub(crate) fn shares_history(&self, a: &str, b: &str) -> bool {
        self.run(&["merge-base", a, b]).is_ok_and(|ran| ran.success)
    }

    /// Whether `commit` is in the history of `of`.
    pub(crate) fn is_ancestor(&self, commit: &str, of: &str) -> bool {
        self.run(&["merge-base", "--is-ancestor", commit, of]).is_ok_and(|ran| ran.success)
    }

    /// Starts this machine's branch at the remote's (joining a remote).
    pub(crate) fn start_at_remote(&self) -> Result<()> {
        self.ok(&["reset", "-q", "--hard", REMOTE_BRANCH]).map(drop)
    }

    /// Merges the remote's branch into this machine's. Each machine writes only its own
    /// logs, so this never asks anyone: the merge is the union of the two.
    pub(crate) fn merge(&self) -> Result<()> {
        if self.dir.join(".git/MERGE_HEAD").exists() {
            // A sync killed in the middle of a merge: start it again.
            let _ = self.run(&["merge", "--abort"]);
        }
        if self.head().is_none() {
            return self.start_at_remote();
        }
        let merge = ["merge", "-q", "--no-edit", "--allow-unrelated-histories", REMOTE_BRANCH];
        let ran = self.run(&merge)?;
        if !ran.success && self.dir.join(".git/MERGE_HEAD").exists() {
            return Err(self.conflict());
        }
        if ran.success || !String::from_utf8_lossy(&ran.stderr).contains("would be overwritten") {
            return succeeded(&merge, ran).map(drop);
        }
        // A merge killed part way writes the other machines' files before it records them
        // (a fast-forward moves the branch last), and they stop the next one as untracked
        // files or local changes. They are in the commits fetched, and everything of this
        // machine's own was committed before a merge: the work tree is put back to this
        // machine's commit and the merge made again.
        self.ok(&["reset", "-q", "--hard", "HEAD"])?;
        self.ok(&["clean", "-f", "-q", "--", "."])?;
        self.ok(&merge).map(drop)
    }

    /// A merge that stopped on a conflict, taken back (the clone is left as it was) and said
    /// with the files in it. Each log has one writer, so a conflict means one was changed
    /// elsewhere, by hand or by another program.
    fn conflict(&self) -> anyhow::Error {
        let files = self.ok(&["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
        let _ = self.run(&["merge", "--abort"]);
        let files: Vec<&str> = files.lines().collect();
        Failure::new(
            exit::ERROR,
            format!(
                "the remote's copy of {} differs from the one this machine wrote: a log has \
                 one writer, so it was changed there by hand or by another program, or another \
                 machine writes as this one",
                files.join(", ")
            ),
        )
        .hint(format!(
            "nothing here was changed. If this machine's cca folder was restored from a backup \
             or copied to another machine, set this one up again: move {} aside, then `cca \
             sync init REMOTE --key KEY` (`cca sync key` on another machine prints it). \
             Otherwise put the remote's copy back as it was (this machine's is in {}), then \
             `cca sync` again",
            self.dir.parent().unwrap_or(&self.dir).display(),
            self.dir.display()
        ))
        .into()
    }

    /// Commits everything written to the repository; false when nothing was.
    pub(crate) fn commit_all(&self, message: &str) -> Result<bool> {
        self.commit(&[], message)
    }

    /// Commits the files `paths` (all that changed when empty); false when nothing changed.
    pub(crate) fn commit(&self, paths: &[&str], message: &str) -> Result<bool> {
        // Naming the files spares git a look at every file of the work tree; past a few
        // thousand, one look is cheaper than the command line.
        if paths.is_empty() || paths.len() > 2_000 {
            self.ok(&["add", "-A", "."])?;
        } else {
            let mut add = vec!["add", "--"];
            add.extend(paths);
            self.ok(&add)?;
        }
        if self.run(&["diff", "--cached", "--quiet"])?.success {
            return Ok(false);
        }
        self.ok(&["commit", "-q", "--no-verify", "-m", message])?;
        Ok(true)
    }

    /// Pushes this machine's branch to the remote's.
    pub(crate) fn push(&self) -> Result<Pushed> {
        let refspec = format!("HEAD:refs/heads/{BRANCH}");
        let ran = self.run(&["push", "-q", "origin", &refspec])?;
        if ran.success {
            return Ok(Pushed::Done);
        }
        let said = String::from_utf8_lossy(&ran.stderr);
        if beaten(&said) {
            return Ok(Pushed::Behind);
        }
        Err(Failure::new(exit::ERROR, format!("cannot push to the remote: {}", said.trim()))
            .hint("what was new here is kept and sent by the next `cca sync`")
            .into())
    }

    /// Files under `folder` that changed between `since` and this machine's branch, or all of
    /// them when there is no `since`.
    pub(crate) fn changed(&self, since: Option<&str>, folder: &str) -> Result<Vec<String>> {
        let listed = match since {
            Some(commit) => {
                self.ok(&["diff", "--name-only", "--no-renames", commit, "HEAD", "--", folder])?
            }
            None if self.head().is_some() => self.ok(&["ls-files", "--", folder])?,
            None => String::new(),
        };
        Ok(listed.lines().map(str::to_string).collect())
    }

    /// Whether `path` was changed by a commit after the one that made it.
    pub(crate) fn changed_since_made(&self, path: &str) -> bool {
        self.ok(&["log", "--format=%H", "--", path]).is_ok_and(|log| log.lines().count() > 1)
    }

    /// Files written here and not yet committed (what a killed sync may have left).
    pub(crate) fn uncommitted(&self, folder: &str) -> Result<Vec<String>> {
        let listed = self.ok(&["status", "--porcelain", "-uall", "--no-renames", "--", folder])?;
        Ok(listed.lines().filter_map(|l| l.get(3..)).map(str::to_string).collect())
    }

    /// Takes this machine's branch back to `commit` (undoing a merge whose records were
    /// refused), keeping nothing written since: everything of this machine's is committed.
    pub(crate) fn reset_to(&self, commit: &str) {
        let _ = self.run(&["reset", "-q", "--hard", commit]);
    }
}

/// What git printed, when it succeeded; else an error with its command line and what it said.
/// Whether a push was refused because another machine's push came first: the branch moved on
/// (`[rejected]`, `fetch first`, `non-fast-forward`), or moved while the remote was updating it
/// (`cannot lock ref`, `[remote rejected] ... (failed to update ref)`).
fn beaten(said: &str) -> bool {
    ["[rejected]", "fetch first", "non-fast-forward", "cannot lock ref", "failed to update ref"]
        .iter()
        .any(|sign| said.contains(sign))
}

fn succeeded(args: &[&str], ran: Ran) -> Result<String> {
    if !ran.success {
        // git says some failures on stdout only.
        let said = match String::from_utf8_lossy(&ran.stderr).trim() {
            "" => String::from_utf8_lossy(&ran.stdout).trim().to_string(),
            said => said.to_string(),
        };
        anyhow::bail!(
            Failure::new(exit::ERROR, format!("git {} failed ({}): {said}", args.join(" "), ran.status))
                .hint("nothing of this machine's is lost: what git could not do is done by the next `cca sync`; if it fails the same way, the clone in $CCA_HOME/sync/repo may be removed, and the next sync makes it again")
        );
    }
    Ok(String::from_utf8_lossy(&ran.stdout).into_owned())
}

/// The remote as git is given it: a folder named from here made absolute, since git runs in
/// the clone's folder (and every later sync runs from anywhere); anything else as it is.
pub(crate) fn remote_address(remote: &str) -> Result<String> {
    if remote.trim().is_empty() {
        bail!(Failure::usage("the remote is empty").hint(
            "name a git remote: a URL, `user@host:path`, or a folder (`git init --bare` makes one)"
        ));
    }
    let path = Path::new(remote);
    if path.is_relative() && !remote.contains("://") && path.exists() {
        let absolute = std::path::absolute(path)
            .with_context(|| format!("cannot make {remote} an absolute path"))?;
        return Ok(absolute.to_string_lossy().into_owned());
    }
    Ok(remote.to_string())
}

/// A remote that is a folder on this machine (a path: `/...`, `./...`, `../...`), made a bare
/// repository when it is empty, or not there in a folder that is, so that "a folder" is a
/// remote as it is said to be; its absolute path. A folder holding other things and no
/// repository is refused. Anything else is `None`: git says what it finds there.
pub(crate) fn make_folder_remote(remote: &str) -> Result<Option<String>> {
    // A path written as one (`/...`, `./...`, `../...`), not a word git could read as an
    // option or a name.
    let is_path = ["/", "./", "../"].iter().any(|p| remote.starts_with(p));
    if !is_path || remote.contains("://") {
        return Ok(None);
    }
    let path = std::path::absolute(remote)
        .with_context(|| format!("cannot make {remote} an absolute path"))?;
    // One folder made at most, in a folder that is there: a typo deeper down is git's to say.
    if !path.exists() && !path.parent().is_some_and(Path::is_dir) {
        return Ok(None);
    }
    let is_repository = path.join("HEAD").is_file() && path.join("objects").is_dir();
    if path.join(".git").exists() || is_repository {
        return Ok(None);
    }
    let empty = match std::fs::read_dir(&path) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            return Err(e).with_context(|| format!("cannot use {} as a remote", path.display()));
        }
    };
    if !empty {
        bail!(
            Failure::usage(format!(
                "{} is not a git repository, and holds other things",
                path.display()
            ))
            .hint(format!(
                "give a new or empty folder (cca makes the repository in it), or make one: `git init --bare {}`",
                crate::human::shell_word(&path.to_string_lossy())
            ))
        );
    }
    std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
    Git::new(&path, false)?.ok(&["init", "-q", "--bare", "-b", BRANCH])?;
    Ok(Some(path.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What git 2.x says when a push loses to another (the last two: both pushed at the same
    /// moment, and the remote's ref moved while it was updating it), and when it fails
    /// otherwise.
    #[test]
    fn a_push_another_machine_beat_is_told_from_other_failures() {
        let beaten_by = [
            " ! [rejected]        HEAD -> cca (fetch first)\nerror: failed to push some refs",
            " ! [rejected]        HEAD -> cca (non-fast-forward)",
            "remote: error: cannot lock ref 'refs/heads/cca': is at 1a2b but expected 3c4d\n \
             ! [remote rejected] HEAD -> cca (failed to update ref)",
        ];
        for said in beaten_by {
            assert!(beaten(said), "{said}");
        }
        for said in [
            "fatal: '/nowhere' does not appear to be a git repository",
            " ! [remote rejected] HEAD -> cca (pre-receive hook declined)",
            "error: RPC failed; curl 22 The requested URL returned error: 403",
        ] {
            assert!(!beaten(said), "{said}");
        }
    }
}
