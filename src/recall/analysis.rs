//! How text becomes the index's words, for the index and for a question alike: runs of
//! letters and digits, text written without spaces (Chinese, Japanese, Korean) in overlapping
//! pairs of characters, long words cut, lower-cased, accents folded, stop words out, English
//! stems. Pure: text in, words out.

use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RawTokenizer, SimpleTokenizer, StopWordFilter, TextAnalyzer,
    Token, TokenFilter, TokenStream, Tokenizer,
};

use super::stems::RememberingStemmer;

/// Words too common to tell exchanges apart: Lucene's English list, and the words a question
/// asks with ("when did we", "how do I").
pub(super) const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with", "what", "when", "where", "which", "who", "why",
    "how", "did", "do", "does", "we", "i", "you", "me", "my", "our", "us", "can", "could",
    "should", "would", "s", "t", "about", "from", "have", "has", "had", "been", "were",
];

pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word)
}

/// The index's analysis of a field's text.
pub(super) fn analyzer() -> TextAnalyzer {
    analysis(SimpleTokenizer::default())
}

/// The filters every text goes through after `tokenizer` cut it in words.
fn analysis<T: Tokenizer>(tokenizer: T) -> TextAnalyzer {
    TextAnalyzer::builder(tokenizer)
        .filter(WordPieces)
        .filter(LowerCaser)
        // `cafe` finds `café`, and `naive` `naïve`: accents are how words are written, not
        // what they are.
        .filter(AsciiFoldingFilter)
        .filter(StopWordFilter::remove(STOP_WORDS.iter().map(|w| w.to_string())))
        .filter(RememberingStemmer)
        .build()
}

/// The characters of a word that are kept: a longer one is cut to its start.
const LONGEST_WORD: usize = 40;

/// The index's analysis of one word a question's words were cut into already
/// ([`super::question::words`], as the tokenizer cuts them): cut again after lower-casing, a
/// word could come apart where the text's did not (`İ` lower-cases to `i` and a combining dot).
pub(super) fn word_analyzer() -> TextAnalyzer {
    analysis(RawTokenizer::default())
}

/// Whether any of `words` is one the index holds words as (not a stop word).
pub(crate) fn any_indexed(words: &[String]) -> bool {
    let mut analyzer = word_analyzer();
    words.iter().any(|word| analyzer.token_stream(word).next().is_some())
}

/// Whether `c` is written without spaces between words: Chinese characters, Japanese kana,
/// Korean syllables.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(
        u32::from(c),
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF
            | 0x20000..=0x2FFFF
    )
}

/// The byte ranges a word is cut into: a run of other characters whole, a run of CJK ones in
/// overlapping pairs (`東京都` is `東京`, `京都`; one alone stays one), as Lucene's CJK
/// analysis does: the tokenizer sees such a run as one word, found only by the whole run.
pub(crate) fn pieces(word: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let end_of = |i: usize| chars.get(i + 1).map_or(word.len(), |&(at, _)| at);
    let mut i = 0;
    while i < chars.len() {
        let cjk = is_cjk(chars[i].1);
        let mut j = i;
        while j + 1 < chars.len() && is_cjk(chars[j + 1].1) == cjk {
            j += 1;
        }
        match cjk && j > i {
            true => out.extend((i..j).map(|k| chars[k].0..end_of(k + 1))),
            false => out.push(chars[i].0..end_of(j)),
        }
        i = j + 1;
    }
    out
}

/// A token filter: each word that holds CJK characters in its [`pieces`], positions kept in
/// order (each piece one further, the words after it moved on, past a gap of one), so that a
/// quoted phrase still finds its words next to each other, and a run's pairs only in it; and
/// every word over [`LONGEST_WORD`] characters cut to its first that many: a long identifier
/// is found all the same (dropped, as tantivy's filter does, it was never found), and a blob
/// (a hash) costs one short word.
#[derive(Clone, Copy)]
struct WordPieces;

impl TokenFilter for WordPieces {
    type Tokenizer<T: Tokenizer> = WordPiecesFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> WordPiecesFilter<T> {
        WordPiecesFilter(tokenizer)
    }
}

#[derive(Clone)]
struct WordPiecesFilter<T>(T);

impl<T: Tokenizer> Tokenizer for WordPiecesFilter<T> {
    type TokenStream<'a> = WordPiecesStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        WordPiecesStream { tail: self.0.token_stream(text), cut: Vec::new(), own: None, shift: 0 }
    }
}

struct WordPiecesStream<T> {
    tail: T,
    /// The pieces of the word being cut still to come, last first.
    cut: Vec<Token>,
    /// The piece given now; `None` when the tail's token is given as it is.
    own: Option<Token>,
    /// How many positions the pieces so far added.
    shift: usize,
}

impl<T: TokenStream> TokenStream for WordPiecesStream<T> {
    fn advance(&mut self) -> bool {
        if !self.next_piece() {
            return false;
        }
        let text = &mut self.token_mut().text;
        if let Some((end, _)) = text.char_indices().nth(LONGEST_WORD) {
            text.truncate(end);
        }
        true
    }

    fn token(&self) -> &Token {
        self.own.as_ref().unwrap_or_else(|| self.tail.token())
    }

    fn token_mut(&mut self) -> &mut Token {
        match &mut self.own {
            Some(own) => own,
            None => self.tail.token_mut(),
        }
    }
}

impl<T: TokenStream> WordPiecesStream<T> {
    /// The next piece, uncut: a pair of the word being cut, or the tail's next word (cut in
    /// pieces when it holds CJK characters).
    fn next_piece(&mut self) -> bool {
        if let Some(next) = self.cut.pop() {
            self.own = Some(next);
            return true;
        }
        self.own = None;
        if !self.tail.advance() {
            return false;
        }
        let shift = self.shift;
        let token = self.tail.token_mut();
        token.position += shift;
        if !token.text.chars().any(is_cjk) {
            return true;
        }
        let pieces = pieces(&token.text);
        // One position more after the run: pairs of two runs (`東京、京都`) are not next to
        // each other as a run's own are, so a quoted run is found only where it is whole.
        self.shift += pieces.len();
        let token = self.tail.token();
        self.cut = pieces
            .into_iter()
            .enumerate()
            .map(|(i, range)| Token {
                offset_from: token.offset_from + range.start,
                offset_to: token.offset_from + range.end,
                position: token.position + i,
                text: token.text[range].to_string(),
                position_length: 1,
            })
            .rev()
            .collect();
        self.own = self.cut.pop();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(mut analyzer: TextAnalyzer, text: &str) -> Vec<(usize, String)> {
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while let Some(token) = stream.next() {
            out.push((token.position, token.text.clone()));
        }
        out
    }

    #[test]
    fn text_without_spaces_is_cut_in_pairs_and_the_words_after_it_move_on() {
        let got = words(analyzer(), "Rust 東京都 locks");
        let want = [(0, "rust"), (1, "東京"), (2, "京都"), (4, "lock")];
        assert_eq!(got, want.map(|(p, w)| (p, w.to_string())));
        assert_eq!(
            words(analyzer(), "x 日 y"),
            [(0, "x".into()), (1, "日".into()), (3, "y".into())]
        );
        // A word mixing both is cut where the kind of character changes.
        let mixed: Vec<String> =
            words(word_analyzer(), "abc東京").into_iter().map(|(_, w)| w).collect();
        assert_eq!(mixed, ["abc", "東京"]);
        let r = "ab東京都c";
        assert_eq!(
            pieces(r).into_iter().map(|p| &r[p]).collect::<Vec<_>>(),
            ["ab", "東京", "京都", "c"]
        );
        assert!(pieces("").is_empty());
        // A long word, or a long piece of one, is cut to its first 40 characters.
        let long = format!("{}東京", "x".repeat(50));
        let cut: Vec<String> = words(word_analyzer(), &long).into_iter().map(|(_, w)| w).collect();
        assert_eq!(cut, ["x".repeat(40), "東京".to_string()]);
    }
}
