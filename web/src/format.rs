//! Numbers as the lab shows them: short, with units, tabular.

/// Steps per second and other large counts: `272.9 k`, `1.23 M`.
/// A batch size, short and exact for powers of two: `1`, `256`, `4k`, `64k`, `1M`.
pub fn envs_label(n: f64) -> String {
    let n = n.round() as u64;
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}k", n >> 10),
        n => n.to_string(),
    }
}

pub fn si(x: f64) -> String {
    let a = x.abs();
    match a {
        a if !a.is_finite() => "–".into(),
        0.0 => "0".into(),
        a if a >= 1e9 => format!("{:.2} G", x / 1e9),
        a if a >= 1e6 => format!("{:.2} M", x / 1e6),
        a if a >= 1e4 => format!("{:.1} k", x / 1e3),
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 1.0 => format!("{x:.1}"),
        _ => format!("{x:.3}"),
    }
}

/// Bytes in binary units: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{v:.0} B"),
        _ => format!("{v:.1} {}", UNITS[unit]),
    }
}

/// Seconds: `850 µs`, `12.3 ms`, `4.56 s`, `3 min 20 s`.
pub fn seconds(s: f64) -> String {
    match s {
        s if !s.is_finite() => "–".into(),
        s if s < 1e-3 => format!("{:.0} µs", s * 1e6),
        s if s < 1.0 => format!("{:.1} ms", s * 1e3),
        s if s < 120.0 => format!("{s:.2} s"),
        s => format!("{} min {:.0} s", (s / 60.0).floor(), s % 60.0),
    }
}

/// A count in full with its thousands marked: `10,000,000`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn percent(p: f64) -> String {
    format!("{p:.1} %")
}

/// `new / base` as the compare view shows it: `1.63×`, or `–` without a base.
pub fn ratio(new: f64, base: f64) -> Option<f64> {
    (base.abs() > f64::EPSILON && new.is_finite() && base.is_finite()).then(|| new / base)
}

pub fn times(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.2}×"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes_read_as_powers_of_two() {
        let labels: Vec<String> = [1.0, 256.0, 4096.0, 65536.0, 1048576.0, 1000.0].map(envs_label).to_vec();
        assert_eq!(labels, ["1", "256", "4k", "64k", "1M", "1000"]);
    }

    #[test]
    fn numbers_are_short_and_carry_their_unit() {
        assert_eq!(si(272_873.6), "272.9 k");
        assert_eq!(si(1_234_567.0), "1.23 M");
        assert_eq!(si(500.0), "500");
        assert_eq!(si(0.25), "0.250");
        assert_eq!(si(0.0), "0");
        assert_eq!(si(f64::NAN), "–");
        assert_eq!([0, 999, 1_000, 500_000, 10_000_000].map(grouped), ["0", "999", "1,000", "500,000", "10,000,000"]);
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(3.5 * 1024.0 * 1024.0), "3.5 MiB");
        assert_eq!(seconds(0.000_85), "850 µs");
        assert_eq!(seconds(0.0123), "12.3 ms");
        assert_eq!(seconds(4.561), "4.56 s");
        assert_eq!(seconds(200.0), "3 min 20 s");
        assert_eq!(percent(39.04), "39.0 %");
    }

    #[test]
    fn ratios_need_a_base() {
        assert_eq!(ratio(300.0, 200.0), Some(1.5));
        assert_eq!(times(ratio(300.0, 200.0)), "1.50×");
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(times(None), "–");
    }
}
