//! `cca sync` over a bare repository in a folder: the first sync of the grep section's 10,000
//! sessions (1 GB) from one machine and into another, the remote's size beside the store's, an
//! incremental sync carrying one new exchange each way, and one with nothing new.

use super::grep::write_grep_corpus;
use super::recall::{dir_bytes, ms};
use super::*;

impl Bench {
    pub(crate) fn sync(&self) {
        println!("## Sync: 10,000 sessions through a git remote\n");
        let sender = self.home("sync-laptop");
        let taker = self.home("sync-desktop");
        let bytes = write_grep_corpus(&sender.dir.join("cca/sessions"), 10_000, 100_000);
        let remote = self.root.path().join("sync-remote.git");
        let out = Command::new("git").args(["init", "-q", "--bare"]).arg(&remote).output().unwrap();
        assert!(out.status.success());
        let remote = remote.to_str().unwrap();

        let start = Instant::now();
        let run = |home: &Home, args: &[&str]| {
            let out = home.command(args, "").output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        run(&sender, &["sync", "init", remote, "--name", "laptop"]);
        let first_send = start.elapsed().as_secs_f64();
        let key = run(&sender, &["sync", "key"]);
        let start = Instant::now();
        run(&taker, &["sync", "init", remote, "--name", "desktop", "--key", key.trim()]);
        let first_take = start.elapsed().as_secs_f64();
        let remote_bytes = dir_bytes(Path::new(remote));
        let clone_bytes = dir_bytes(&sender.dir.join("cca/sync/repo/.git"));
        println!(
            "The grep section's 10,000 generated sessions ({:.2} GB), encrypted. First sync from the machine holding them (`cca sync init`, a new remote): **{first_send:.1} s**; into a second machine (`cca sync init --key`): **{first_take:.1} s**. The remote holds **{:.2} GB** ({:.0}% of the transcripts: each record is sealed, so git cannot compress it, and base64 adds a third); each machine's clone of it {:.2} GB.\n",
            bytes as f64 / 1e9,
            remote_bytes as f64 / 1e9,
            remote_bytes as f64 * 100.0 / bytes as f64,
            clone_bytes as f64 / 1e9,
        );

        let (mut send_ms, mut take_ms, mut idle_ms) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..10 {
            let session = format!("2026{:04}-{:06}", 101 + round / 1000, round % 1000);
            sender
                .cca(&["search", "-q", "-s", &session, &format!("one more turn {round}")], "say ok")
                .checked();
            let start = Instant::now();
            run(&sender, &["sync", "-q"]);
            send_ms.push(ms(start));
            let start = Instant::now();
            run(&taker, &["sync", "-q"]);
            take_ms.push(ms(start));
            let start = Instant::now();
            run(&taker, &["sync", "-q"]);
            idle_ms.push(ms(start));
        }
        println!("{TABLE}");
        println!("{}", Stats::new(send_ms).row("`cca sync` sending one new exchange"));
        println!("{}", Stats::new(take_ms).row("`cca sync` taking it on another machine"));
        println!("{}", Stats::new(idle_ms).row("`cca sync` with nothing new"));
        println!(
            "\nTarget: an incremental sync well under a second over a local remote; nothing new cheaper still.\n"
        );
    }
}
