//! What an exchange is about beyond its words: a question asked in other words than the
//! answer's ("how did we make the app open faster?" of an exchange about its cold start) shares
//! few or none of them, and lexical ranking alone misses it.
//!
//! Each exchange gets a vector, the mean of its words' vectors from a table built into cca
//! (`words.bin`: 10,822 English words by 64 dimensions, the whole-word tokens of WordLlama's
//! token embeddings, made by benches/recall/export_wordllama.py), and each session the mean of
//! its exchanges'. A question's vector is compared with an exchange's and its session's by
//! cosine, centred on the candidates' mean (every such mean leans one common way, which says
//! nothing), and the sum is added to the best candidates' lexical score ([`super::found`]).
//! Pure functions; the vectors are kept in the index beside each exchange.

use std::sync::OnceLock;

/// A vector's length.
pub(crate) const DIMENSIONS: usize = 64;

pub(crate) type Vector = [f32; DIMENSIONS];

/// The table: `u32` count and dimensions, a scale per word (`f32`), each word's vector as
/// signed bytes (scale * byte / 127), then the words in byte order, each ended by a newline.
static TABLE: &[u8] = include_bytes!("words.bin");

struct Table {
    words: Vec<&'static str>,
    /// Each word's first eight bytes as one number ([`key`]), in the words' order: a word is
    /// found by comparing numbers, not strings. (A binary search of the strings, a call to
    /// `memcmp` a step, was a quarter of the CPU of building the index.)
    keys: Vec<u64>,
    scales: &'static [u8],
    vectors: &'static [u8],
    /// Which of the words are stop words, which say nothing of what a text is about.
    stop: Vec<bool>,
    /// The longest word's length: a longer one is none of them.
    longest: usize,
}

fn table() -> &'static Table {
    static PARSED: OnceLock<Table> = OnceLock::new();
    PARSED.get_or_init(|| {
        let number = |at: usize| u32::from_le_bytes(TABLE[at..at + 4].try_into().unwrap_or([0; 4]));
        let count = number(0) as usize;
        assert_eq!(number(4) as usize, DIMENSIONS, "words.bin is for {DIMENSIONS} dimensions");
        let (scales, rest) = TABLE[8..].split_at(4 * count);
        let (vectors, words) = rest.split_at(DIMENSIONS * count);
        let words = std::str::from_utf8(words).unwrap_or_default();
        let words: Vec<&str> = words.split_terminator('\n').collect();
        assert_eq!(words.len(), count, "words.bin holds {count} words");
        // Each stop word looked up in the table, not each word of the table in the stop words.
        let mut stop = vec![false; count];
        for word in super::analysis::STOP_WORDS {
            if let Ok(at) = words.binary_search(word) {
                stop[at] = true;
            }
        }
        let longest = words.iter().map(|w| w.len()).max().unwrap_or(0);
        let keys = words.iter().map(|w| key(w.as_bytes())).collect();
        Table { words, keys, scales, vectors, stop, longest }
    })
}

/// A word's first eight bytes as a number, padded with zeros: in the words' byte order, since
/// a word that is the start of another pads with zeros where the other has its next letters.
fn key(word: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = word.len().min(8);
    bytes[..n].copy_from_slice(&word[..n]);
    u64::from_be_bytes(bytes)
}

impl Table {
    /// Where the table holds `word`, if it does: among the words with its [`key`], the one
    /// that is all of it.
    fn find(&self, word: &[u8]) -> Option<usize> {
        let key = key(word);
        let first = self.keys.partition_point(|k| *k < key);
        let same = self.keys[first..].iter().take_while(|k| **k == key).count();
        (first..first + same).find(|&at| self.words[at].as_bytes() == word)
    }
}

/// Calls `each` for every word of `text` but stop words, with where the table holds it (`None`
/// when it does not). A word is a run of ASCII letters and digits, lower-cased. Indexing runs
/// this over every word kept: no allocation, one binary search a word.
fn scan(text: &str, mut each: impl FnMut(Option<usize>)) {
    let table = table();
    let mut lower = [0u8; 64];
    for word in text.as_bytes().split(|b| !b.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        let at = if word.len() <= table.longest.min(lower.len()) {
            let lower = &mut lower[..word.len()];
            lower.iter_mut().zip(word).for_each(|(l, b)| *l = b.to_ascii_lowercase());
            table.find(lower)
        } else {
            None
        };
        match at {
            Some(at) if table.stop[at] => {}
            Some(at) => each(Some(at)),
            None if is_stop(word) => {}
            None => each(None),
        }
    }
}

/// A stop word the table lacks (it holds them all but a few).
fn is_stop(word: &[u8]) -> bool {
    std::str::from_utf8(word).is_ok_and(|w| super::analysis::is_stop_word(&w.to_ascii_lowercase()))
}

/// Adds the `at`th word's vector to `sum`.
fn add_word(sum: &mut Vector, at: usize) {
    let table = table();
    let scale = table.scales[4 * at..4 * at + 4].try_into().map(f32::from_le_bytes).unwrap_or(0.0);
    let bytes = &table.vectors[DIMENSIONS * at..DIMENSIONS * (at + 1)];
    for (s, &b) in sum.iter_mut().zip(bytes) {
        *s += f32::from(b as i8) * scale / 127.0;
    }
}

/// The mean of the vectors of a text's words (stop words aside), of unit length; `None` when
/// the table holds none of them.
pub(crate) fn of_text(text: &str) -> Option<Vector> {
    let mut sum = [0.0; DIMENSIONS];
    let mut any = false;
    scan(text, |at| {
        if let Some(at) = at {
            add_word(&mut sum, at);
            any = true;
        }
    });
    any.then(|| unit(sum)).flatten()
}

/// The share of a text's words (stop words aside) that the table holds: how far its vector
/// speaks for it. A name or an identifier the table lacks is left to the words' own score.
pub(crate) fn known_share(text: &str) -> f32 {
    let (mut known, mut all) = (0, 0);
    scan(text, |at| {
        all += 1;
        known += usize::from(at.is_some());
    });
    if all == 0 { 0.0 } else { known as f32 / all as f32 }
}

/// The mean of some vectors; `None` for none.
pub(crate) fn mean<'a>(vectors: impl IntoIterator<Item = &'a Vector>) -> Option<Vector> {
    let mut sum = [0.0; DIMENSIONS];
    let mut count = 0;
    for v in vectors {
        add(&mut sum, v, 1.0);
        count += 1;
    }
    (count > 0).then(|| sum.map(|x| x / count as f32))
}

/// How close `a` and `b` are, seen from `centre`: the cosine of `a - centre` and `b - centre`.
pub(crate) fn closeness(a: &Vector, b: &Vector, centre: &Vector) -> f32 {
    let from = |v: &Vector| {
        let mut d = *v;
        add(&mut d, centre, -1.0);
        unit(d)
    };
    match (from(a), from(b)) {
        (Some(a), Some(b)) => a.iter().zip(&b).map(|(x, y)| x * y).sum(),
        _ => 0.0,
    }
}

/// As the index keeps it: a signed byte a dimension, the largest 127 (its length does not
/// matter: it is made whole again when read).
pub(crate) fn to_bytes(v: &Vector) -> Vec<u8> {
    let largest = v.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(f32::MIN_POSITIVE);
    v.iter().map(|x| (x / largest * 127.0).round() as i8 as u8).collect()
}

/// A vector the index kept ([`to_bytes`]); `None` for anything else.
pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Vector> {
    if bytes.len() != DIMENSIONS {
        return None;
    }
    let mut v = [0.0; DIMENSIONS];
    for (x, &b) in v.iter_mut().zip(bytes) {
        *x = f32::from(b as i8);
    }
    unit(v)
}

fn add(sum: &mut Vector, v: &Vector, weight: f32) {
    for (s, x) in sum.iter_mut().zip(v) {
        *s += weight * x;
    }
}

fn unit(mut v: Vector) -> Option<Vector> {
    let length = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    // A NaN (a damaged vector) is no length either.
    if length.is_nan() || length <= 1e-6 {
        return None;
    }
    v.iter_mut().for_each(|x| *x /= length);
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &str, b: &str) -> f32 {
        let (a, b) = (of_text(a).unwrap(), of_text(b).unwrap());
        a.iter().zip(&b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn the_table_reads_whole_and_words_of_one_meaning_are_close() {
        assert_eq!(table().words.len(), 10_822);
        assert!(table().words.windows(2).all(|w| w[0] < w[1]), "in byte order");
        // Every word is found where it is, by its key, and no word that is not there is.
        let table = table();
        for (at, word) in table.words.iter().enumerate() {
            assert_eq!(table.find(word.as_bytes()), Some(at), "{word}");
            let longer = format!("{word}zz");
            assert_eq!(table.find(longer.as_bytes()), table.words.binary_search(&&*longer).ok());
            let shorter = &word[..word.len() - 1];
            assert_eq!(table.find(shorter.as_bytes()), table.words.binary_search(&shorter).ok());
        }
        assert_eq!(table.find(b""), None);
        assert!(cosine("database", "mysql") > 0.4, "{}", cosine("database", "mysql"));
        assert!(cosine("database", "mysql") > cosine("database", "apple"));
        assert!(
            cosine("the app is slow", "make it fast") > cosine("the app is slow", "payment tax")
        );
        assert!(of_text("the of and").is_none(), "stop words only");
        assert!(of_text("zzqxv 12345678901").is_none(), "no word the table holds");
        assert!(of_text("").is_none());
    }

    #[test]
    fn a_vector_kept_in_bytes_comes_back_the_same_way() {
        let v = of_text("retry the request with backoff").unwrap();
        let back = from_bytes(&to_bytes(&v)).unwrap();
        let cos: f32 = v.iter().zip(&back).map(|(x, y)| x * y).sum();
        assert!(cos > 0.999, "{cos}");
        assert!(from_bytes(&[1, 2, 3]).is_none());
        assert!(from_bytes(&[0; DIMENSIONS]).is_none());
    }

    #[test]
    fn closeness_is_seen_from_the_centre() {
        let a = of_text("database").unwrap();
        let b = of_text("mysql").unwrap();
        let c = of_text("apple").unwrap();
        let centre = mean([&a, &b, &c]).unwrap();
        assert!(closeness(&a, &b, &centre) > closeness(&a, &c, &centre));
        assert_eq!(closeness(&a, &a, &a), 0.0, "nothing left of it once the centre is taken away");
    }
}
