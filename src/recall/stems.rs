//! The analyzer's English stemming (tantivy's Snowball stemmer), remembering each word's stem.
//!
//! Stemming was a third of the CPU time of a first build: the same few thousand words come
//! back in every exchange, and Snowball works each out again. Each analyzer (one per field and
//! segment being written) keeps the stems it has found; a word's stem is the stemmer's, so the
//! terms indexed are the same as without the memory. Pure: words in, words out.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use tantivy::tokenizer::{
    Language, RawTokenizer, Stemmer, TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
};

/// Stems remembered per analyzer before the memory starts again (a few MB at most).
const REMEMBERED: usize = 100_000;

/// FNV-1a: words are short, and the standard library's SipHash was about 5% of a build's CPU
/// time in this filter; nothing here needs a hash that resists chosen keys.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Each word met, with its stem when that is not the word itself.
type Stems = HashMap<String, Option<String>, BuildHasherDefault<Fnv>>;

/// A token filter: [`Stemmer`] for English, with a memory.
#[derive(Clone, Default)]
pub(crate) struct RememberingStemmer;

impl TokenFilter for RememberingStemmer {
    type Tokenizer<T: Tokenizer> = RememberingStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> RememberingStemmerFilter<T> {
        RememberingStemmerFilter {
            inner: tokenizer,
            stems: Stems::default(),
            stemmer: TextAnalyzer::builder(RawTokenizer::default())
                .filter(Stemmer::new(Language::English))
                .build(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct RememberingStemmerFilter<T> {
    inner: T,
    stems: Stems,
    /// The stemmer, on one word at a time.
    stemmer: TextAnalyzer,
}

impl<T: Tokenizer> Tokenizer for RememberingStemmerFilter<T> {
    type TokenStream<'a> = RememberingStemmerStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        RememberingStemmerStream {
            tail: self.inner.token_stream(text),
            stems: &mut self.stems,
            stemmer: &mut self.stemmer,
        }
    }
}

pub(crate) struct RememberingStemmerStream<'a, T> {
    tail: T,
    stems: &'a mut Stems,
    stemmer: &'a mut TextAnalyzer,
}

impl<T: TokenStream> TokenStream for RememberingStemmerStream<'_, T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let token = self.tail.token_mut();
        // English stems only what is written in ASCII letters (accents were folded before): a
        // pair of CJK characters, of which a store holds hundreds of thousands, would only
        // fill the memory and start it again, each met once.
        if !token.text.is_ascii() {
            return true;
        }
        if let Some(known) = self.stems.get(&token.text) {
            if let Some(stem) = known {
                token.text.clear();
                token.text.push_str(stem);
            }
            return true;
        }
        let stem = {
            let mut stream = self.stemmer.token_stream(&token.text);
            let stem = stream.advance().then(|| stream.token().text.clone());
            stem.filter(|stem| *stem != token.text)
        };
        if self.stems.len() >= REMEMBERED {
            self.stems.clear();
        }
        match stem {
            Some(stem) => {
                let word = std::mem::replace(&mut token.text, stem.clone());
                self.stems.insert(word, Some(stem));
            }
            None => {
                self.stems.insert(token.text.clone(), None);
            }
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::tokenizer::SimpleTokenizer;

    fn stems(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn the_stems_are_the_stemmers_the_first_time_and_after() {
        let text = "running runs ran easily fixed fixes fixing connection connections";
        let mut plain =
            TextAnalyzer::builder(SimpleTokenizer::default()).filter(Stemmer::default()).build();
        let mut remembering =
            TextAnalyzer::builder(SimpleTokenizer::default()).filter(RememberingStemmer).build();
        let want = stems(&mut plain, text);
        assert_eq!(stems(&mut remembering, text), want);
        assert_eq!(stems(&mut remembering, text), want);
    }
}
