//! Numbers and names as people read them: sizes, signals, turn ranges; and dates as people
//! write them (`--since 3d`). Pure.

use anyhow::{Context, Result};

use crate::error::Failure;

/// A word as a shell would need it typed in a command cca suggests: as it is when plain, else
/// in single quotes, in which no shell expands anything (`$(...)`, `` ` ``, `$PATH` and `!`
/// stay as written, so a hint pasted back does what it says and runs nothing else).
pub(crate) fn shell_word(word: &str) -> String {
    // A leading `=` is a path search in zsh (`=ls`).
    let plain = !word.is_empty()
        && !word.starts_with('=')
        && word.chars().all(|c| c.is_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// `1 exchange`, `2 exchanges`: a count and its noun, singular for one. `many` is the plural.
pub(crate) fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1.5 MiB`, `812 bytes`.
pub(crate) fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// `turn 3` for one turn, `turns 1-3` for several.
pub(crate) fn turns(first: u64, through: u64) -> String {
    match first == through {
        true => format!("turn {first}"),
        false => format!("turns {first}-{through}"),
    }
}

/// `Ctrl-C`, `SIGTERM`, `SIGHUP`, `SIGQUIT`, `Ctrl-Z`, `signal N`.
pub(crate) fn signal_name(signal: i32) -> String {
    match signal {
        signal_hook::consts::SIGINT => "Ctrl-C".into(),
        signal_hook::consts::SIGTERM => "SIGTERM".into(),
        signal_hook::consts::SIGHUP => "SIGHUP".into(),
        signal_hook::consts::SIGQUIT => "SIGQUIT".into(),
        signal_hook::consts::SIGTSTP => "Ctrl-Z".into(),
        n => format!("signal {n}"),
    }
}

/// From when, until when: either open.
pub(crate) type Span =
    (Option<chrono::DateTime<chrono::Utc>>, Option<chrono::DateTime<chrono::Utc>>);

/// The span between two points in time as a person types them ([`parse_date`]): the start of
/// `since`, the end of `until`, each open when not given. A span that ends before it starts is
/// a usage error rather than a search that finds nothing; `names` are the two as the front end
/// calls them (`--since`, or `since` for an agent).
pub(crate) fn parse_span(
    since: Option<&str>,
    until: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
    names: [&str; 2],
) -> Result<Span> {
    let [s, u] = names;
    let start = since.map(|d| parse_date(d, now, false).context(s.to_string())).transpose()?;
    let end = until.map(|d| parse_date(d, now, true).context(u.to_string())).transpose()?;
    if let (Some(start), Some(end), Some(since), Some(until)) = (start, end, since, until)
        && start > end
    {
        anyhow::bail!(
            Failure::usage(format!(
                "{s} `{since}` is later than {u} `{until}`: nothing said could be in between"
            ))
            .hint(format!("swap them: {s} {until} {u} {since}"))
        );
    }
    Ok((start, end))
}

/// A point in time as a person types it: `2026-11-21` (local time; the day's start, or its end
/// with `end_of_day`), `today` and `yesterday` (the same, of the local day now or before it),
/// `2026-11-21 10:15` or `2026-11-21T10:15:00` (local), RFC 3339, or a time ago: `30m` (or
/// `30min`), `12h`, `3d`, `2w`, `2mo` (30 days each), `1y` (365 days).
pub(crate) fn parse_date(
    text: &str,
    now: chrono::DateTime<chrono::Utc>,
    end_of_day: bool,
) -> Result<chrono::DateTime<chrono::Utc>> {
    use chrono::{Local, NaiveDate, NaiveDateTime, TimeDelta, TimeZone, Utc};
    let t = text.trim();
    // A time the clocks skip (the hour lost to daylight saving) is read with the offset in
    // force before the jump, as a clock not yet put forward would show it: 02:30 on the day
    // New York skips from 02:00 to 03:00 is 03:30. No two jumps are a day apart.
    let local = |naive: NaiveDateTime| {
        Local.from_local_datetime(&naive).earliest().or_else(|| {
            let day_before = naive.checked_sub_signed(TimeDelta::days(1))?;
            let before = Local.from_local_datetime(&day_before).earliest()?;
            Some(naive.and_local_timezone(*before.offset()).single()?.with_timezone(&Local))
        })
    };
    let ago = t.find(|c: char| !c.is_ascii_digit()).filter(|&i| i > 0).and_then(|i| {
        let n: i64 = t[..i].parse().ok()?;
        match &t[i..] {
            "m" | "min" => TimeDelta::try_minutes(n),
            "h" => TimeDelta::try_hours(n),
            "d" => TimeDelta::try_days(n),
            "w" => TimeDelta::try_weeks(n),
            // A month of 30 days and a year of 365: a search's edge, not a calendar's.
            "mo" => TimeDelta::try_days(n.checked_mul(30)?),
            "y" => TimeDelta::try_days(n.checked_mul(365)?),
            _ => None,
        }
    });
    let when = if let Some(ago) = ago {
        now.checked_sub_signed(ago)
    } else if let Ok(t) = chrono::DateTime::parse_from_rfc3339(t) {
        Some(t.with_timezone(&Utc))
    } else if let Some(naive) =
        ["%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
    {
        local(naive).map(|t| t.with_timezone(&Utc))
    } else if let Some(day) = match t {
        "today" => Some(now.with_timezone(&Local).date_naive()),
        "yesterday" => now.with_timezone(&Local).date_naive().pred_opt(),
        _ => NaiveDate::parse_from_str(t, "%Y-%m-%d").ok(),
    } {
        let naive = match end_of_day {
            false => day.and_hms_opt(0, 0, 0),
            true => day.and_hms_nano_opt(23, 59, 59, 999_999_999),
        };
        naive.and_then(local).map(|t| t.with_timezone(&Utc))
    } else {
        None
    };
    when.ok_or_else(|| {
        Failure::usage(format!("`{text}` is not a date cca understands"))
            .hint("write 2026-11-21, today, yesterday, \"2026-11-21 10:15\", 2026-11-21T10:15:00Z, or a time ago: 30m (minutes), 12h, 3d, 2w, 2mo (months), 1y")
            .into()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_turn_is_not_a_range() {
        assert_eq!(super::turns(1, 1), "turn 1");
        assert_eq!(super::turns(2, 5), "turns 2-5");
    }

    #[test]
    fn dates_as_people_write_them() {
        use super::parse_date;
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-21T10:15:00Z").unwrap().to_utc();
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        assert_eq!(parse_date("3d", now, false).unwrap(), at("2026-11-18T10:15:00Z"));
        assert_eq!(parse_date("12h", now, true).unwrap(), at("2026-11-20T22:15:00Z"));
        assert_eq!(parse_date("2w", now, false).unwrap(), at("2026-11-07T10:15:00Z"));
        assert_eq!(parse_date("30m", now, false).unwrap(), at("2026-11-21T09:45:00Z"));
        assert_eq!(parse_date("30min", now, false).unwrap(), at("2026-11-21T09:45:00Z"));
        assert_eq!(parse_date("2mo", now, false).unwrap(), at("2026-09-22T10:15:00Z"));
        assert_eq!(parse_date("1y", now, false).unwrap(), at("2025-11-21T10:15:00Z"));
        assert!(parse_date("30s", now, false).unwrap_err().to_string().contains("not a date"));
        assert_eq!(
            parse_date("2026-11-20T08:00:00+01:00", now, false).unwrap(),
            at("2026-11-20T07:00:00Z")
        );
        let local = |s: &str| {
            use chrono::TimeZone;
            let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap();
            chrono::Local.from_local_datetime(&naive).earliest().unwrap().to_utc()
        };
        assert_eq!(parse_date("2026-11-20", now, false).unwrap(), local("2026-11-20 00:00:00"));
        assert!(parse_date("2026-11-20", now, true).unwrap() > local("2026-11-20 23:59:59"));
        assert_eq!(
            parse_date("2026-11-20 10:15", now, false).unwrap(),
            local("2026-11-20 10:15:00")
        );
        // The local day now, and the one before it.
        let today = now.with_timezone(&chrono::Local).date_naive();
        let start = |day: chrono::NaiveDate| local(&format!("{day} 00:00:00"));
        assert_eq!(parse_date("today", now, false).unwrap(), start(today));
        assert_eq!(parse_date("yesterday", now, false).unwrap(), start(today.pred_opt().unwrap()));
        assert!(parse_date("yesterday", now, true).unwrap() < start(today));
        assert!(
            parse_date("yesterday", now, true).unwrap()
                > start(today) - chrono::TimeDelta::seconds(1)
        );
        for bad in ["", "tomorrow", "3x", "3s", "d", "2026-13-01", "-3d"] {
            assert!(parse_date(bad, now, false).is_err(), "{bad}");
        }
    }
}
