//! Where the lab is, kept in the URL's hash so that a reload (or a link) opens the same
//! view: `#/` the lab, `#/run/7` a run, `#/compare/3,4` runs side by side,
//! `#/playground` (or the path `/playground`) CartPole in the browser.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Home,
    Run(u64),
    Compare(Vec<u64>),
    Playground,
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip_and_nonsense_is_home() {
        for r in [Route::Home, Route::Run(7), Route::Compare(vec![3, 4, 12]), Route::Playground] {
            assert_eq!(Route::parse(&r.hash()), r);
        }
        assert_eq!(Route::parse(""), Route::Home);
        assert_eq!(Route::parse("#/run/x"), Route::Home);
        assert_eq!(Route::parse("#/compare/"), Route::Home);
        assert_eq!(Route::parse("#/compare/1,b"), Route::Home);
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
