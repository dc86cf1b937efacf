//! The semantic experiments of the recall-quality section (issue 34, point 8): static word
//! vectors, a word and its numbers a line in the file CCA_BENCH_GLOVE names (GloVe 6B 50d as
//! benches/recall/export_glove.py writes it, or any other table of the kind: WordLlama's, which
//! cca ships, came out of these rows), averaged over an exchange's words and over its
//! session's (IDF-weighted unless NOIDF is set, stop words out), compared with the question's
//! by cosine, and fused with the best lexical ranking of the experiments: over every exchange,
//! or over its best K only, as cca does. Run only when CCA_BENCH_GLOVE is set: the tables are
//! not part of the repository.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::recall_quality::Key;
use super::recall_rank::{Doc, Features, Ranker, Stemming, Terms, is_stop_word, tokens};

/// The vocabulary kept: the most frequent words of the table, as a table built into cca would
/// keep (GloVe's file is in frequency order).
const VOCABULARY: usize = 40_000;

type Scorer = fn(&[(String, Vec<Key>)], &[Doc], &[Vec<usize>]) -> [f64; 5];

pub(crate) fn experiments(
    questions: &[(String, Vec<Key>)],
    docs: &[Doc],
    path: &Path,
    score: Scorer,
) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut vectors: HashMap<&str, Vec<f32>> = HashMap::new();
    for line in text.lines().take(VOCABULARY) {
        let mut parts = line.split(' ');
        let word = parts.next().unwrap();
        vectors.insert(word, parts.map(|p| p.parse().unwrap()).collect());
    }
    // Document frequencies over the exchanges, for the weights.
    let mut df: HashMap<String, usize> = HashMap::new();
    for d in docs {
        let words: HashSet<String> =
            tokens(&format!("{} {}", d.question, d.answer)).into_iter().collect();
        for w in words {
            *df.entry(w).or_default() += 1;
        }
    }
    let n = docs.len() as f32;
    let dim = vectors.values().next().map_or(1, Vec::len);
    let embed = |text: &str| -> Vec<f32> {
        let mut sum = vec![0f32; dim];
        for w in tokens(text) {
            if is_stop_word(&w) {
                continue;
            }
            let Some(v) = vectors.get(w.as_str()) else { continue };
            let idf = if std::env::var_os("NOIDF").is_some() {
                1.0
            } else {
                (1.0 + n / (1.0 + *df.get(&w).unwrap_or(&0) as f32)).ln()
            };
            for (s, x) in sum.iter_mut().zip(v) {
                *s += idf * x;
            }
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            sum.iter_mut().for_each(|x| *x /= norm);
        }
        sum
    };
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let exchanges: Vec<Vec<f32>> =
        docs.iter().map(|d| embed(&format!("{} {}", d.question, d.answer))).collect();
    let count = docs.iter().map(|d| d.session + 1).max().unwrap_or(0);
    let mut session_text = vec![String::new(); count];
    for d in docs {
        let t = &mut session_text[d.session];
        if t.is_empty() {
            t.push_str(&d.title);
        }
        t.push(' ');
        t.push_str(&d.question);
        t.push(' ');
        t.push_str(&d.answer);
    }
    let sessions: Vec<Vec<f32>> = session_text.iter().map(|t| embed(t)).collect();
    let mut summed_sessions = vec![vec![0f32; dim]; count];
    for (d, e) in docs.iter().zip(&exchanges) {
        summed_sessions[d.session].iter_mut().zip(e).for_each(|(s, x)| *s += x);
    }
    for v in &mut summed_sessions {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
        v.iter_mut().for_each(|x| *x /= norm);
    }
    // The direction every mean of word vectors shares (SIF's common component, here the mean of
    // the exchanges' vectors), taken out for the "centred" rows.
    let mut mean = vec![0f32; dim];
    for e in &exchanges {
        mean.iter_mut().zip(e).for_each(|(m, x)| *m += x / n);
    }
    let centre = |v: &Vec<f32>| -> Vec<f32> {
        let mut c = vec![0f32; dim];
        c.iter_mut().zip(v.iter().zip(&mean)).for_each(|(c, (x, m))| *c = x - m);
        let norm = c.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
        c.iter_mut().for_each(|x| *x /= norm);
        c
    };
    let centred_exchanges: Vec<Vec<f32>> = exchanges.iter().map(centre).collect();
    let centred_sessions: Vec<Vec<f32>> = sessions.iter().map(centre).collect();

    // The lexical ranking to fuse with: the experiments' best (stop words, plurals, fields,
    // proximity, synonyms, whole session 1.0).
    let lex = Features {
        stop_words: true,
        stemming: Stemming::Plurals,
        fields: Some([1.5, 1.0, 1.0]),
        proximity: 0.5,
        synonyms: true,
        session_document: 1.0,
        ..Features::default()
    };
    let terms = Terms::new(docs, &lex);
    let ranker = Ranker::new(docs, &terms, lex);
    let order = |scores: &[f64], all: bool| -> Vec<usize> {
        let mut found: Vec<usize> = (0..scores.len()).filter(|&d| all || scores[d] > 0.0).collect();
        found.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        found
    };
    let mut rows: Vec<(String, Vec<Vec<usize>>)> = Vec::new();
    let mut add = |label: &str, ranked: Vec<usize>| match rows.iter_mut().find(|r| r.0 == label) {
        Some(row) => row.1.push(ranked),
        None => rows.push((label.to_string(), vec![ranked])),
    };
    for (ask, _) in questions {
        let q = embed(ask);
        let lexical = ranker.score_all(ask);
        let top = lexical.iter().copied().fold(0.0f64, f64::max).max(1e-9);
        let exchange: Vec<f64> = exchanges.iter().map(|e| cos(&q, e) as f64).collect();
        let session: Vec<f64> = docs.iter().map(|d| cos(&q, &sessions[d.session]) as f64).collect();
        let both: Vec<f64> = exchange.iter().zip(&session).map(|(e, s)| e + s).collect();
        add("lexical (the experiments' best, whole session 1.0)", order(&lexical, false));
        add("semantic alone: exchange + session cosine", order(&both, true));
        let lex_rank = order(&lexical, false);
        let sem_rank = order(&both, true);
        let mut rrf = vec![0.0; docs.len()];
        for (r, &d) in lex_rank.iter().enumerate() {
            rrf[d] += 1.0 / (60.0 + r as f64);
        }
        for (r, &d) in sem_rank.iter().enumerate() {
            rrf[d] += 1.0 / (60.0 + r as f64);
        }
        add("reciprocal-rank fusion (k 60) of the two", order(&rrf, true));
        let qc = centre(&q);
        let centred: Vec<f64> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                (cos(&qc, &centred_exchanges[i]) + cos(&qc, &centred_sessions[d.session])) as f64
            })
            .collect();
        add("semantic alone, centred", order(&centred, true));
        for w in [0.5, 1.0, 1.5, 2.0, 3.0] {
            let fused: Vec<f64> =
                lexical.iter().zip(&centred).map(|(l, s)| l / top + w * s).collect();
            add(&format!("lexical / its best + {w} x semantic, centred"), order(&fused, true));
        }
        // What cca could do at search time: only the lexical ranking's best K weighed again,
        // each session's vector the sum of its exchanges', centred on the candidates' mean.
        let lex_order = order(&lexical, true);
        for k in [50, 200] {
            let cands = &lex_order[..k.min(lex_order.len())];
            let dim = q.len();
            let mut local = vec![0f32; dim];
            for &d in cands {
                local.iter_mut().zip(&exchanges[d]).for_each(|(m, x)| *m += x / cands.len() as f32);
            }
            let centre_on = |v: &[f32], m: &[f32]| -> Vec<f32> {
                let mut c: Vec<f32> = v.iter().zip(m).map(|(x, m)| x - m).collect();
                let norm = c.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                c.iter_mut().for_each(|x| *x /= norm);
                c
            };
            let q_local = centre_on(&q, &local);
            let q_global = centre_on(&q, &mean);
            for w in [0.5, 1.0, 2.0] {
                for (label, qv, m, summed) in [
                    ("corpus centre, session text", &q_global, &mean, false),
                    ("candidates' centre, session text", &q_local, &local, false),
                    ("candidates' centre, session = sum of exchanges", &q_local, &local, true),
                    ("corpus centre, session = sum of exchanges", &q_global, &mean, true),
                ] {
                    let mut fused = vec![f64::NEG_INFINITY; docs.len()];
                    for &d in cands {
                        let sv = if summed {
                            &summed_sessions[docs[d].session]
                        } else {
                            &sessions[docs[d].session]
                        };
                        let sem =
                            cos(qv, &centre_on(&exchanges[d], m)) + cos(qv, &centre_on(sv, m));
                        fused[d] = lexical[d] / top + w * sem as f64;
                    }
                    add(&format!("top {k} weighed again, {label}, {w} x"), order(&fused, true));
                }
            }
        }
        for w in [0.1, 0.25, 0.5, 1.0] {
            let fused: Vec<f64> = lexical.iter().zip(&both).map(|(l, s)| l / top + w * s).collect();
            add(
                &format!("lexical / its best + {w} x semantic (exchange + session)"),
                order(&fused, true),
            );
            let fused: Vec<f64> =
                lexical.iter().zip(&session).map(|(l, s)| l / top + w * s).collect();
            add(&format!("lexical / its best + {w} x session cosine"), order(&fused, true));
        }
    }
    println!(
        "#### Word vectors (issue 34, point 8)\n\nThe table {} (its first {VOCABULARY} words); an exchange's vector the mean of its words' (stop words out; IDF-weighted unless NOIDF was set), a session's the same over all its exchanges; cosine with the question's.\n",
        path.display()
    );
    println!(
        "| ranking | hit@5 | hit@5 even half | hit@5 odd half | recall@5 | session hit@5 |\n| --- | ---: | ---: | ---: | ---: | ---: |"
    );
    for (label, ranked) in rows {
        let [hit, even, odd, recall, session] = score(questions, docs, &ranked);
        println!("| {label} | {hit:.2} | {even:.2} | {odd:.2} | {recall:.2} | {session:.2} |");
    }
    println!();
}
