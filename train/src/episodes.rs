//! The episode tally: how many ended, and the mean return of the last 100.

use std::collections::VecDeque;

/// The last 100 episode returns and the episode count.
#[derive(Default)]
pub struct Episodes {
    recent: VecDeque<f64>,
    pub count: u64,
}

impl Episodes {
    pub fn push(&mut self, ret: f64) {
        self.count += 1;
        if self.recent.len() == 100 {
            self.recent.pop_front();
        }
        self.recent.push_back(ret);
    }

    pub fn mean(&self) -> Option<f64> {
        (!self.recent.is_empty()).then(|| self.recent.iter().sum::<f64>() / self.recent.len() as f64)
    }
}
