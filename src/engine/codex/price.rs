//! What a codex turn cost: codex reports tokens and no cost, so the cost is worked out from
//! OpenAI's public price list, for the models on it. A model not on it has no cost recorded:
//! a figure is never guessed.

use crate::engine::Usage;

/// A model's price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Price {
    input: f64,
    /// Input tokens the prompt cache served.
    cached_input: f64,
    output: f64,
}

const fn price(input: f64, cached_input: f64, output: f64) -> Price {
    Price { input, cached_input, output }
}

/// OpenAI's public API prices (standard tier), listed here on 2026-11-28: a snapshot, which a
/// price change leaves behind until it is updated here (docs/REFERENCE.md says so).
const PRICES: &[(&str, Price)] = &[
    ("gpt-5", price(1.25, 0.125, 10.0)),
    ("gpt-5-codex", price(1.25, 0.125, 10.0)),
    ("gpt-5.1", price(1.25, 0.125, 10.0)),
    ("gpt-5.1-codex", price(1.25, 0.125, 10.0)),
    ("gpt-5.1-codex-max", price(1.25, 0.125, 10.0)),
    ("gpt-5-mini", price(0.25, 0.025, 2.0)),
    ("gpt-5.1-codex-mini", price(0.25, 0.025, 2.0)),
    ("gpt-5-nano", price(0.05, 0.005, 0.40)),
    ("gpt-5.2", price(1.75, 0.175, 14.0)),
    ("codex-mini-latest", price(1.50, 0.375, 6.0)),
    ("o3", price(2.0, 0.5, 8.0)),
    ("o4-mini", price(1.10, 0.275, 4.40)),
    ("gpt-4.1", price(2.0, 0.5, 8.0)),
];

/// The price of `model`: its own name on the list, or a dated snapshot of one
/// (`gpt-5-2025-08-07` is `gpt-5`'s, as OpenAI prices them alike).
fn price_of(model: &str) -> Option<Price> {
    let find = |name: &str| PRICES.iter().find(|(listed, _)| *listed == name).map(|(_, p)| *p);
    find(model).or_else(|| find(undated(model)?))
}

/// `NAME` of `NAME-YYYY-MM-DD`; `None` for a name with no date at its end.
fn undated(model: &str) -> Option<&str> {
    let (base, date) = model.split_at_checked(model.len().checked_sub(11)?)?;
    let digits = |part: &str, n: usize| part.len() == n && part.bytes().all(|b| b.is_ascii_digit());
    let mut parts = date.strip_prefix('-')?.split('-');
    let dated = [4, 2, 2].iter().all(|&n| parts.next().is_some_and(|p| digits(p, n)));
    (dated && !base.is_empty()).then_some(base)
}

/// What `usage` cost on `model`, in US dollars; `None` for a model not on the list, or usage
/// without its input and output counts. codex counts the cached tokens among the input ones.
pub(crate) fn cost(model: &str, usage: &Usage) -> Option<f64> {
    let price = price_of(model)?;
    let (input, output) = (usage.input_tokens?, usage.output_tokens?);
    let cached = usage.cached_tokens.unwrap_or(0).min(input);
    let dollars = (input - cached) as f64 * price.input
        + cached as f64 * price.cached_input
        + output as f64 * price.output;
    Some(dollars / 1_000_000.0)
}

/// `usage` with its cost on `model`, where cca knows the model and its price.
pub(crate) fn priced(model: Option<&str>, usage: Usage) -> Usage {
    let cost_usd = model.and_then(|m| cost(m, &usage));
    Usage { cost_usd, ..usage }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, output: u64) -> Usage {
        Usage {
            input_tokens: Some(input),
            cached_tokens: Some(cached),
            output_tokens: Some(output),
            cost_usd: None,
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn cached_input_is_priced_apart_from_the_rest_of_the_input() {
        // 1,000,000 in, 400,000 of them cached, 100,000 out on gpt-5:
        // 600,000 × 1.25 + 400,000 × 0.125 + 100,000 × 10, per million.
        let cost = cost("gpt-5", &usage(1_000_000, 400_000, 100_000));
        assert!(close(cost, 0.75 + 0.05 + 1.0), "{cost:?}");
        let cost = cost_of("o4-mini", 2_000, 0, 500);
        assert!(close(cost, (2_000.0 * 1.10 + 500.0 * 4.40) / 1e6), "{cost:?}");
        // No cached count: all of the input at the full price.
        let mut u = usage(10, 0, 3);
        u.cached_tokens = None;
        assert!(close(super::cost("gpt-5.2", &u), (10.0 * 1.75 + 3.0 * 14.0) / 1e6));
    }

    fn cost_of(model: &str, input: u64, cached: u64, output: u64) -> Option<f64> {
        cost(model, &usage(input, cached, output))
    }

    #[test]
    fn a_dated_snapshot_is_priced_as_its_model_and_an_unknown_model_has_no_cost() {
        let dated = cost_of("gpt-5-2025-08-07", 100, 40, 7);
        assert!(close(dated, cost_of("gpt-5", 100, 40, 7).unwrap()), "{dated:?}");
        assert!(close(cost_of("o3-2025-04-16", 1_000_000, 0, 0), 2.0));
        for unknown in ["gpt-mock", "gpt-5-pro", "gpt-5-2025-08", "GPT-5", "", "-2025-08-07"] {
            assert_eq!(cost_of(unknown, 100, 40, 7), None, "{unknown}");
        }
        // Without the counts to price, no cost either.
        let half = Usage { input_tokens: Some(10), ..Usage::default() };
        assert_eq!(cost("gpt-5", &half), None);
        assert_eq!(priced(None, usage(1, 0, 1)).cost_usd, None);
        assert!(priced(Some("gpt-5-mini"), usage(1, 0, 1)).cost_usd.is_some());
    }

    #[test]
    fn more_cached_tokens_than_input_ones_never_make_a_negative_cost() {
        let cost = cost_of("gpt-5-nano", 10, 50, 0);
        assert!(close(cost, 10.0 * 0.005 / 1e6), "{cost:?}");
    }
}
