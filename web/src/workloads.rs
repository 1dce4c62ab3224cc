//! Each workload's view of its rollout frames: the `web.rs` of its folder
//! (`workloads/src/<name>/web.rs`, compiled into this crate), read from the registry
//! (`hotlab_shared::workload_list!`). A view shows the frames of its own workload only (each
//! reads its frame type from `hotlab_shared::workloads`).

use hotlab_shared::protocol::Frame;
use leptos::prelude::*;

/// The registry as this crate reads it: each workload's `web.rs` and its `View`.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident = $name:literal in $module:ident ($settings:ident)),+ $(,)?) => {
        // Each workload's view lives in its folder, beside its declarations and native code.
        // The path is from this file's folder (`web/src/`).
        #[path = "../../workloads/src"]
        mod folders {
            $(pub mod $module { pub mod web; })+
        }
        $(pub use folders::$module::web as $module;)+

        /// Every workload's view of the run's newest frame.
        #[component]
        pub fn FrameViews(frame: Signal<Option<Frame>>) -> impl IntoView {
            view! { $(<$module::View frame/>)+ }
        }
    };
}

hotlab_shared::workload_list!(registry);
