//! Numbers and names as people read them: sizes, signals, turn ranges. Pure.

/// `1.5 MiB`, `812 bytes`.
pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// `turn 3` for one turn, `turns 1-3` for several.
pub fn turns(first: u64, through: u64) -> String {
    match first == through {
        true => format!("turn {first}"),
        false => format!("turns {first}-{through}"),
    }
}

/// `Ctrl-C`, `SIGTERM`, `SIGHUP`, `SIGQUIT`, `Ctrl-Z`, `signal N`.
pub fn signal_name(signal: i32) -> String {
    match signal {
        signal_hook::consts::SIGINT => "Ctrl-C".into(),
        signal_hook::consts::SIGTERM => "SIGTERM".into(),
        signal_hook::consts::SIGHUP => "SIGHUP".into(),
        signal_hook::consts::SIGQUIT => "SIGQUIT".into(),
        signal_hook::consts::SIGTSTP => "Ctrl-Z".into(),
        n => format!("signal {n}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_turn_is_not_a_range() {
        assert_eq!(super::turns(1, 1), "turn 1");
        assert_eq!(super::turns(2, 5), "turns 2-5");
    }
}
