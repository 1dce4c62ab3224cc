//! A banner over every page while the lab's run store is not keeping up: `failing` (its
//! commits fail, a full disk say: live runs were stopped, new ones are refused) or `slow`
//! (live events are shed, and counted, while it is behind). Asked of `/api/system` every
//! few seconds; nothing shows while the store writes.

use super::api;
use hotlab_protocol::system::{StoreHealth, StoreState, SystemInfo};
use leptos::prelude::*;
use std::time::Duration;

const REFRESH: Duration = Duration::from_secs(3);

/// The banner's words, or None while the store writes.
pub fn words(health: &StoreHealth) -> Option<String> {
    let why = health.message.as_deref().unwrap_or("no reason given");
    match health.state {
        StoreState::Ok => None,
        StoreState::Slow => Some(format!("The run store is slow: {why}.")),
        StoreState::Failing => Some(format!(
            "The run store cannot write: {why}. Live runs were stopped and new runs wait; what is stored can be read."
        )),
    }
}

#[component]
pub fn StoreBanner() -> impl IntoView {
    let health = RwSignal::new(None::<StoreHealth>);
    let refresh = move || {
        leptos::task::spawn_local(async move {
            if let Ok(info) = api::get::<SystemInfo>("/api/system").await {
                if health.try_with_untracked(|h| h != &info.store) == Some(true) {
                    let _ = health.try_set(info.store);
                }
            }
        })
    };
    refresh();
    if let Ok(handle) = set_interval_with_handle(refresh, REFRESH) {
        on_cleanup(move || handle.clear());
    }
    move || {
        health
            .get()
            .as_ref()
            .and_then(words)
            .map(|w| view! { <div class="banner" data-testid="store-banner">{w}</div> })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_store_that_is_behind_or_failing_shows() {
        let h = |state, message: Option<&str>| StoreHealth {
            state,
            message: message.map(String::from),
            waiting: 3,
            shed: 0,
        };
        assert_eq!(words(&h(StoreState::Ok, None)), None);
        let slow = words(&h(StoreState::Slow, Some("a commit has taken 4 s so far"))).unwrap();
        assert!(slow.contains("slow: a commit has taken 4 s"), "{slow}");
        let failing = words(&h(StoreState::Failing, Some("the disk under the data dir /d is full"))).unwrap();
        assert!(
            failing.contains("cannot write: the disk under the data dir /d is full")
                && failing.contains("new runs wait"),
            "{failing}"
        );
    }
}
