//! What reaches the remote: each record sealed with age (X25519) for the user's key, or, on
//! a remote the user chose to trust (`--plain`), as it is. Also the names of the logs there,
//! which under a key say nothing of the session they hold.

use std::str::FromStr;

use age::secrecy::ExposeSecret;
use anyhow::{Result, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::record::hash;

/// How records are written on the remote.
pub(crate) enum Seal {
    /// As plain JSON lines.
    Plain,
    /// Each line age-encrypted to the key's public half, then base64.
    Key(age::x25519::Identity),
}

/// How a key is written: age's own secret-key form, one line.
pub(crate) const KEY_PREFIX: &str = "AGE-SECRET-KEY-1";

impl Seal {
    /// A new key, for a new remote.
    pub(crate) fn generate() -> Seal {
        Seal::Key(age::x25519::Identity::generate())
    }

    /// A key from its text (`AGE-SECRET-KEY-1...`, surrounding blanks ignored).
    pub(crate) fn from_key(text: &str) -> Result<Seal> {
        let text = text.trim();
        age::x25519::Identity::from_str(text)
            .map(Seal::Key)
            .map_err(|_| match text.starts_with(KEY_PREFIX) {
                // The right start, cut short or mistyped: the key's own checksum says so.
                true => anyhow!(
                    "not a sync key: it starts as one but is cut short or mistyped (a key is {KEY_PREFIX} and 58 more letters and digits, with a checksum)"
                ),
                false => anyhow!("not a sync key: a key is one line starting with {KEY_PREFIX}"),
            })
    }

    /// The key's text, to keep and to give to another machine; none for plain.
    pub(crate) fn key_text(&self) -> Option<String> {
        match self {
            Seal::Plain => None,
            Seal::Key(identity) => Some(identity.to_string().expose_secret().to_string()),
        }
    }

    /// The key's public half (`age1...`), written on the remote so that a machine joining
    /// with another key is told so before it reads anything.
    pub(crate) fn recipient(&self) -> Option<String> {
        match self {
            Seal::Plain => None,
            Seal::Key(identity) => Some(identity.to_public().to_string()),
        }
    }

    /// A record's line as the remote keeps it.
    pub(crate) fn seal(&self, line: &str) -> String {
        match self {
            Seal::Plain => line.to_string(),
            Seal::Key(identity) => {
                let sealed = age::encrypt(&identity.to_public(), line.as_bytes())
                    .expect("encrypting to an X25519 key in memory cannot fail");
                STANDARD.encode(sealed)
            }
        }
    }

    /// A line of the remote, opened; an error when it is not sealed for this key or was
    /// changed.
    pub(crate) fn open(&self, line: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Seal::Plain => Ok(line.to_vec()),
            Seal::Key(identity) => {
                let sealed = STANDARD.decode(line).map_err(|_| "not base64".to_string())?;
                age::decrypt(identity, &sealed).map_err(|e| format!("cannot be decrypted: {e}"))
            }
        }
    }

    /// The name the remote gives a session's folder of logs: the id itself when plain, else a
    /// keyed hash of it, so the remote's host does not learn when each session began.
    pub(crate) fn token(&self, session: &str) -> String {
        match self {
            Seal::Plain => session.to_string(),
            Seal::Key(_) => {
                let secret = self.key_text().unwrap_or_default();
                hash(format!("{secret}\0{session}").as_bytes())[..32].to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_line_opens_with_its_key_only_and_shows_nothing_of_its_text() {
        let seal = Seal::generate();
        let key = seal.key_text().unwrap();
        assert!(key.starts_with(KEY_PREFIX));
        let line = seal.seal("{\"text\":\"the retry moves into the client\"}");
        assert!(!line.contains("retry") && !line.contains('\n'));
        let again = Seal::from_key(&format!("  {key}\n")).unwrap();
        assert_eq!(
            again.open(line.as_bytes()).unwrap(),
            b"{\"text\":\"the retry moves into the client\"}"
        );
        assert!(Seal::generate().open(line.as_bytes()).is_err());
        let mut tampered = line.into_bytes();
        let middle = tampered.len() / 2;
        tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
        assert!(again.open(&tampered).is_err());
        assert!(Seal::from_key("age1notasecret").is_err());
        // A key cut short, or one letter changed, is said to be so.
        let last = if key.ends_with('Q') { 'P' } else { 'Q' };
        let mistyped = format!("{}{last}", &key[..key.len() - 1]);
        for broken in [key[..20].to_string(), mistyped] {
            let e = Seal::from_key(&broken).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("cut short or mistyped"), "{broken}: {e}");
        }
        assert!(Seal::from_key("AGE-SECRET-KEY-1QQQQ").is_err());
    }

    #[test]
    fn a_token_hides_the_session_id_under_a_key_and_is_the_same_on_every_machine() {
        let seal = Seal::generate();
        let again = Seal::from_key(&seal.key_text().unwrap()).unwrap();
        let token = seal.token("20261128-101500");
        assert_eq!(token, again.token("20261128-101500"));
        assert_ne!(token, seal.token("20261128-101501"));
        assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(Seal::Plain.token("20261128-101500"), "20261128-101500");
    }
}
