//! Env 0's pictures, from its worker process to the frames, through two files in a folder
//! of this env's own (see `worker.py`): when the trainer sends a frame it takes the newest
//! picture and leaves a `want` file, and the worker draws the next one after a step once it
//! sees `want` and a second has passed since the last. A picture costs milliseconds of
//! Python (about 11 ms for CartPole-v1's 600 × 400, and pygame's start the first time), so
//! none is drawn that no one asked for, and at most one a second: about the rate at which
//! the history keeps frames.

use hotlab_specs::gym::GymImage;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Seconds between two pictures, at least.
pub const EVERY_S: f64 = 1.0;
/// The newest picture, a [`GymImage`] as JSON.
pub const PICTURE: &str = "env0.json";
/// There while the trainer wants a picture.
pub const WANT: &str = "want";

/// The picture file and the newest picture taken from it.
#[derive(Default)]
pub struct Pictures {
    /// The folder, made when the first worker that draws starts.
    dir: OnceLock<Option<PathBuf>>,
    newest: Mutex<Option<GymImage>>,
}

impl Pictures {
    /// The folder where the worker holding env 0 finds `want` and writes `env0.json` (None
    /// if none could be made: the run goes on without pictures).
    pub fn folder(&self) -> Option<PathBuf> {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let dir = self.dir.get_or_init(|| {
            let n = MADE.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("hotlab-gym-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).ok().map(|_| dir)
        });
        dir.clone()
    }

    /// The newest picture: the worker's latest if it wrote one since, else the one taken
    /// before; and the next one asked for.
    pub fn newest(&self) -> Option<GymImage> {
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = self.dir.get().and_then(|d| d.as_ref()) {
            let file = dir.join(PICTURE);
            if let Ok(text) = std::fs::read(&file) {
                let _ = std::fs::remove_file(&file);
                if let Ok(image) = serde_json::from_slice::<GymImage>(&text) {
                    *newest = Some(image);
                }
            }
            let want = dir.join(WANT);
            if !want.exists() {
                let _ = std::fs::write(want, b"");
            }
        }
        newest.clone()
    }
}

impl Drop for Pictures {
    fn drop(&mut self) {
        if let Some(Some(dir)) = self.dir.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
