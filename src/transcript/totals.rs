//! What the answers in a transcript cost, as the engines reported it: token counts and dollars,
//! the figures that make no sense left out, sums that saturate.

use serde::{Deserialize, Serialize};

/// The most tokens one answer is taken to have used (2^40, about a trillion): a count above it
/// is not a count (two answers of 2^63 tokens summed to 0).
pub const MAX_TOKENS: u64 = 1 << 40;
/// The most one answer is taken to have cost, in US dollars.
pub const MAX_COST_USD: f64 = 1e6;

/// A token count an engine reported (or a file holds), if it makes sense: at most
/// [`MAX_TOKENS`]; else why not.
pub fn tokens_figure(n: u64) -> Result<u64, &'static str> {
    if n <= MAX_TOKENS { Ok(n) } else { Err("more than 2^40 tokens") }
}

/// A cost in US dollars, if it makes sense: a finite number from 0 to [`MAX_COST_USD`]; else
/// why not.
pub fn cost_figure(usd: f64) -> Result<f64, &'static str> {
    if !usd.is_finite() {
        Err("not a finite number")
    } else if usd < 0.0 {
        Err("negative")
    } else if usd > MAX_COST_USD {
        Err("more than $1,000,000")
    } else {
        // -0.0 would show as `$-0.0000`.
        Ok(usd + 0.0)
    }
}

/// What the answers in a transcript cost, as the engines reported it (claude reports tokens and
/// cost; others may report nothing, and then nothing is shown). A figure that makes no sense
/// ([`tokens_figure`], [`cost_figure`]) is not added but counted in `left_out`, for a note;
/// sums saturate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// Figures left out because they made no sense.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A cost in dollars as cca keeps and adds it: to the hundred-millionth of a dollar, so that no
/// binary fraction shows (`0.00008`, not `0.00007999999999999999`).
pub fn round_cost(usd: f64) -> f64 {
    let scaled = usd * 1e8;
    // A figure too large to scale has no fraction left to show.
    if scaled.is_finite() { scaled.round() / 1e8 } else { usd }
}

impl Totals {
    /// These totals and one more answer's usage.
    pub fn add(
        self,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        cost_usd: Option<f64>,
    ) -> Totals {
        let mut left_out = self.left_out;
        let mut sum = |total: Option<u64>, n: Option<u64>| match n.map(tokens_figure) {
            None => total,
            Some(Ok(n)) => Some(total.unwrap_or(0).saturating_add(n)),
            Some(Err(_)) => {
                left_out = left_out.saturating_add(1);
                total
            }
        };
        let input_tokens = sum(self.input_tokens, input_tokens);
        let output_tokens = sum(self.output_tokens, output_tokens);
        let cost_usd = match cost_usd.map(cost_figure) {
            None => self.cost_usd,
            // Finite figures cannot add up to infinity before 10^302 answers; still, saturate.
            Some(Ok(usd)) => Some(round_cost((self.cost_usd.unwrap_or(0.0) + usd).min(f64::MAX))),
            Some(Err(_)) => {
                left_out = left_out.saturating_add(1);
                self.cost_usd
            }
        };
        Totals { input_tokens, output_tokens, cost_usd, left_out }
    }

    /// Whether any answer reported anything.
    pub fn is_empty(&self) -> bool {
        self.input_tokens.is_none()
            && self.output_tokens.is_none()
            && self.cost_usd.is_none()
            && self.left_out == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_leave_out_figures_that_make_no_sense_and_saturate() {
        let huge = 1u64 << 63;
        let t = Totals::default().add(Some(huge), Some(5), Some(f64::INFINITY));
        let t = t.add(Some(huge), Some(MAX_TOKENS), Some(-3.0)).add(None, None, Some(f64::NAN));
        assert_eq!(t.input_tokens, None, "no sensible input figure: none shown");
        assert_eq!(t.output_tokens, Some(5 + MAX_TOKENS));
        assert_eq!(t.cost_usd, None);
        assert_eq!(t.left_out, 5);
        let big = Totals { output_tokens: Some(u64::MAX - 1), cost_usd: Some(f64::MAX), ..t };
        let sum = big.add(None, Some(MAX_TOKENS), Some(MAX_COST_USD));
        assert_eq!((sum.output_tokens, sum.cost_usd), (Some(u64::MAX), Some(f64::MAX)));
        assert_eq!(cost_figure(-0.0).map(|c| c.is_sign_positive()), Ok(true));
        assert!(cost_figure(MAX_COST_USD + 1.0).is_err() && tokens_figure(MAX_TOKENS + 1).is_err());
    }

    #[test]
    fn costs_add_up_without_binary_fractions() {
        let t = Totals::default().add(None, None, Some(0.1)).add(None, None, Some(0.2));
        assert_eq!(t.cost_usd, Some(0.3));
        assert_eq!(round_cost(0.00007999999999999999), 0.00008);
    }
}
