//! A run's WebSocket: events after `since`, reconnecting by itself (with the last `seq`
//! it has) until the run's final status, and telling the page whether it is connected.

use hotlab_protocol::Event;
use leptos::prelude::*;
use std::time::Duration;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Whether the page is receiving the run's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Connecting,
    Open,
    /// Lost; trying again.
    Lost,
    /// The run is over and its history is here: nothing more to receive.
    Done,
}

/// The stream's URL on this page's server.
fn url(run: u64, since: u64) -> Option<String> {
    let loc = web_sys::window()?.location();
    let scheme = if loc.protocol().ok()? == "https:" { "wss" } else { "ws" };
    Some(format!("{scheme}://{}/api/ws?run={run}&since={since}", loc.host().ok()?))
}

/// Follows run `run`: each event goes to `on_event` (which returns whether it was the
/// final one); `link` tracks the connection. Stops when `alive` turns false.
pub fn follow(
    run: u64,
    since: impl Fn() -> u64 + 'static,
    on_event: impl Fn(Event) -> bool + 'static,
    link: RwSignal<Link>,
    alive: StoredValue<bool>,
) {
    let since = std::rc::Rc::new(since);
    let on_event = std::rc::Rc::new(on_event);
    connect(run, since, on_event, link, alive, 0);
}

fn connect(
    run: u64,
    since: std::rc::Rc<dyn Fn() -> u64>,
    on_event: std::rc::Rc<dyn Fn(Event) -> bool>,
    link: RwSignal<Link>,
    alive: StoredValue<bool>,
    attempt: u32,
) {
    if !alive.try_get_value().unwrap_or(false) {
        return;
    }
    let Some(socket) = url(run, since()).and_then(|u| web_sys::WebSocket::new(&u).ok()) else {
        let _ = link.try_set(Link::Lost);
        return;
    };
    let done = std::rc::Rc::new(std::cell::Cell::new(false));
    let onopen = Closure::<dyn FnMut()>::new(move || {
        let _ = link.try_set(Link::Open);
    });
    let handler = std::rc::Rc::clone(&on_event);
    let finished = std::rc::Rc::clone(&done);
    let onmessage = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |m: web_sys::MessageEvent| {
        let Some(text) = m.data().as_string() else { return };
        if let Ok(e) = serde_json::from_str::<Event>(&text) {
            if handler(e) {
                finished.set(true);
            }
        }
    });
    let onclose = Closure::<dyn FnMut()>::new(move || {
        if done.get() {
            let _ = link.try_set(Link::Done);
            return;
        }
        if !alive.try_get_value().unwrap_or(false) {
            return;
        }
        let _ = link.try_set(Link::Lost);
        // Back off to at most 5 s between tries.
        let wait = Duration::from_millis((500 * 2u64.pow(attempt.min(3))).min(5000));
        let (since, on_event) = (std::rc::Rc::clone(&since), std::rc::Rc::clone(&on_event));
        set_timeout(move || connect(run, since, on_event, link, alive, attempt + 1), wait);
    });
    socket.set_onopen(Some(onopen.as_ref().unchecked_ref()));
    socket.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    socket.set_onclose(Some(onclose.as_ref().unchecked_ref()));
    // The socket owns its handlers from here on.
    onopen.forget();
    onmessage.forget();
    onclose.forget();
    SOCKETS.with(|s| {
        let mut s = s.borrow_mut();
        s.retain(|(r, _)| *r != run); // an earlier, closed attempt
        s.push((run, socket));
    });
}

thread_local! {
    static SOCKETS: std::cell::RefCell<Vec<(u64, web_sys::WebSocket)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Closes run `run`'s socket (the page left its view; set `alive` false first so that
/// it is not reopened).
pub fn close(run: u64) {
    SOCKETS.with(|s| {
        s.borrow_mut().retain(|(r, socket)| {
            if *r == run {
                let _ = socket.close();
            }
            *r != run
        })
    });
}
