//! Where the lab is, kept in the URL's hash so that a reload (or a link) opens the same
//! view: `#/` the lab, `#/run/7` a run, `#/compare/3,4` runs side by side,
//! `#/playground` (or the path `/playground`) CartPole in the browser, `#/lessons` the
//! lessons and `#/lesson/ID?KNOB=VALUE&repeats=K&seconds=T&hide=KNOB,…&present=1` one
//! lesson with its parameters (a teacher's link opens it as it was set),
//! `#/lessons?present=1&at=N&seconds=T&repeats=K` the presenter's tour at its Nth lesson,
//! `#/guide/SECTION` the guide to the panels, `#/sweep/ID` a sweep's table.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Home,
    Run(u64),
    Compare(Vec<u64>),
    Playground,
    Lessons,
    Tour(Tour),
    Lesson(LessonLink),
    Sweep(u64),
    /// The guide, at a section (empty: its top).
    Guide(String),
}

/// The presenter's tour: a lesson a screen, in catalogue order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tour {
    /// The lesson on screen, from 1.
    pub at: usize,
    /// Budgets for every lesson's run, over each lesson's own.
    pub seconds: Option<String>,
    pub repeats: Option<String>,
}

impl Tour {
    /// From the query after `lessons?`; None when it is not a tour (`present` absent or 0).
    fn parse(query: &str) -> Option<Self> {
        let mut tour = Tour { at: 1, seconds: None, repeats: None };
        let mut present = false;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "present" => present = v != "0",
                "at" => tour.at = v.parse().unwrap_or(1).max(1),
                "seconds" => tour.seconds = Some(unescape(v)),
                "repeats" => tour.repeats = Some(unescape(v)),
                _ => {}
            }
        }
        present.then_some(tour)
    }

    fn hash(&self) -> String {
        let mut h = format!("#/lessons?present=1&at={}", self.at);
        if let Some(s) = &self.seconds {
            h.push_str(&format!("&seconds={s}"));
        }
        if let Some(r) = &self.repeats {
            h.push_str(&format!("&repeats={r}"));
        }
        h
    }
}

/// A lesson and the parameters its link carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LessonLink {
    pub id: String,
    /// Knobs over the lesson's baseline, by name.
    pub settings: BTreeMap<String, String>,
    pub repeats: Option<String>,
    pub seconds: Option<String>,
    /// Knobs the page does not show.
    pub hide: Vec<String>,
    /// Large type and nothing else on screen (a projector).
    pub present: bool,
}

/// `%XX` escapes decoded (a browser escapes some characters of a hash it was given).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl LessonLink {
    fn parse(rest: &str) -> Option<Self> {
        let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
        let id = id.trim_matches('/');
        if id.is_empty() {
            return None;
        }
        let mut link = LessonLink { id: unescape(id), ..LessonLink::default() };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = unescape(v);
            match k {
                "repeats" => link.repeats = Some(v),
                "seconds" => link.seconds = Some(v),
                "hide" => link.hide = v.split(',').filter(|h| !h.is_empty()).map(str::to_string).collect(),
                "present" => link.present = v != "0",
                knob => {
                    link.settings.insert(unescape(knob), v);
                }
            }
        }
        Some(link)
    }

    fn hash(&self) -> String {
        let mut q: Vec<String> = self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        q.extend(self.repeats.as_ref().map(|r| format!("repeats={r}")));
        q.extend(self.seconds.as_ref().map(|s| format!("seconds={s}")));
        if !self.hide.is_empty() {
            q.push(format!("hide={}", self.hide.join(",")));
        }
        if self.present {
            q.push("present=1".into());
        }
        match q.is_empty() {
            true => format!("#/lesson/{}", self.id),
            false => format!("#/lesson/{}?{}", self.id, q.join("&")),
        }
    }
}

impl Route {
    /// A hash as the browser gives it (`#/run/7`); anything unknown is home.
    pub fn parse(hash: &str) -> Route {
        let path = hash.trim_start_matches('#').trim_start_matches('/');
        let mut parts = path.splitn(2, '/');
        match (parts.next(), parts.next()) {
            (Some("run"), Some(id)) => id.parse().map_or(Route::Home, Route::Run),
            (Some("compare"), Some(ids)) => {
                let ids: Option<Vec<u64>> = ids.split(',').map(|i| i.trim().parse().ok()).collect();
                ids.filter(|v| !v.is_empty()).map_or(Route::Home, Route::Compare)
            }
            (Some("playground"), _) => Route::Playground,
            (Some(lessons), _) if lessons.starts_with("lessons?") => {
                Tour::parse(&lessons["lessons?".len()..]).map_or(Route::Lessons, Route::Tour)
            }
            (Some("lessons"), _) => Route::Lessons,
            (Some("guide"), section) => Route::Guide(section.unwrap_or("").trim_matches('/').to_string()),
            (Some("lesson"), Some(rest)) => LessonLink::parse(rest).map_or(Route::Lessons, Route::Lesson),
            (Some("sweep"), Some(id)) => id.parse().map_or(Route::Home, Route::Sweep),
            _ => Route::Home,
        }
    }

    /// The route of a location: its hash, else its path (`/playground` is a link that
    /// works without a hash).
    pub fn from_location(pathname: &str, hash: &str) -> Route {
        match hash.trim_start_matches('#').trim_matches('/') {
            "" => Route::parse(pathname),
            _ => Route::parse(hash),
        }
    }

    pub fn hash(&self) -> String {
        match self {
            Route::Home => "#/".into(),
            Route::Run(id) => format!("#/run/{id}"),
            Route::Compare(ids) => {
                let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                format!("#/compare/{}", ids.join(","))
            }
            Route::Playground => "#/playground".into(),
            Route::Lessons => "#/lessons".into(),
            Route::Tour(tour) => tour.hash(),
            Route::Lesson(link) => link.hash(),
            Route::Sweep(id) => format!("#/sweep/{id}"),
            Route::Guide(s) if s.is_empty() => "#/guide".into(),
            Route::Guide(s) => format!("#/guide/{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip_and_nonsense_is_home() {
        let link = LessonLink {
            id: "worker-waits".into(),
            settings: [("envs".to_string(), "16".to_string()), ("hidden".to_string(), "64,64".to_string())].into(),
            repeats: Some("2".into()),
            seconds: Some("0.5".into()),
            hide: vec!["wait".into(), "workers".into()],
            present: true,
        };
        let lesson = LessonLink { id: "op-dispatch".into(), ..LessonLink::default() };
        for r in [
            Route::Home,
            Route::Run(7),
            Route::Compare(vec![3, 4, 12]),
            Route::Playground,
            Route::Lessons,
            Route::Lesson(link),
            Route::Lesson(lesson),
            Route::Sweep(5),
            Route::Tour(Tour { at: 3, seconds: Some("0.5".into()), repeats: None }),
            Route::Tour(Tour { at: 1, seconds: None, repeats: Some("1".into()) }),
            Route::Guide("noise".into()),
            Route::Guide(String::new()),
        ] {
            assert_eq!(Route::parse(&r.hash()), r);
        }
        let Route::Lesson(l) = Route::parse("#/lesson/precision?hidden=256%2C256&present=0") else { panic!() };
        assert_eq!((l.settings["hidden"].as_str(), l.present), ("256,256", false));
        assert_eq!(Route::parse("#/lesson/"), Route::Lessons);
        assert_eq!(Route::parse(""), Route::Home);
        assert_eq!(Route::parse("#/run/x"), Route::Home);
        assert_eq!(Route::parse("#/compare/"), Route::Home);
        assert_eq!(Route::parse("#/compare/1,b"), Route::Home);
        assert_eq!(Route::parse("#/lessons?present=1"), Route::Tour(Tour { at: 1, seconds: None, repeats: None }));
        assert_eq!(Route::parse("#/lessons?present=0&at=3"), Route::Lessons, "present=0 is the catalogue");
        assert_eq!(Route::parse("#/lessons?present=1&at=x"), Route::Tour(Tour { at: 1, seconds: None, repeats: None }));
        assert_eq!(Route::parse("#/lessons?present=1&at=0"), Route::Tour(Tour { at: 1, seconds: None, repeats: None }));
    }

    #[test]
    fn the_path_counts_when_the_hash_is_empty() {
        assert_eq!(Route::from_location("/playground", ""), Route::Playground);
        assert_eq!(Route::from_location("/playground", "#/"), Route::Playground);
        assert_eq!(Route::from_location("/playground", "#/run/3"), Route::Run(3));
        assert_eq!(Route::from_location("/", "#/playground"), Route::Playground);
        assert_eq!(Route::from_location("/", ""), Route::Home);
    }
}
