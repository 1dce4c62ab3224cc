//! The worker's outbox: every message of its runs, numbered per run, kept until the lab
//! acknowledges it. Up to a limit of bytes it is held in memory; past it, newer messages
//! go to a spill file beside the worker and come back into memory as the lab catches up,
//! so a lab that is away for an hour costs disk, not memory, and loses nothing.

use anyhow::{Context, Result};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// One numbered message, as the JSON text the link sends.
struct Entry {
    run: u64,
    n: u64,
    text: String,
    sent: bool,
}

/// Messages newer than all of those in memory, a line each (`RUN N TEXT`).
struct Spill {
    path: PathBuf,
    file: Option<File>,
    /// Where the next line to bring back into memory starts.
    read_at: u64,
    /// Lines written and not yet read back.
    pending: usize,
}

pub struct Outbox {
    memory: VecDeque<Entry>,
    bytes: usize,
    limit: usize,
    spill: Spill,
    /// The last number given to each run's messages.
    numbered: HashMap<u64, u64>,
    /// The last number the lab has of each run (messages up to it are dropped).
    acked: HashMap<u64, u64>,
}

impl Outbox {
    /// An outbox keeping up to `limit` bytes in memory, spilling to `spill`.
    pub fn new(spill: PathBuf, limit: usize) -> Self {
        Self {
            memory: VecDeque::new(),
            bytes: 0,
            limit: limit.max(1),
            spill: Spill { path: spill, file: None, read_at: 0, pending: 0 },
            numbered: HashMap::new(),
            acked: HashMap::new(),
        }
    }

    /// Numbers the next message of `run`; `text` makes its wire form from the number.
    pub fn push(&mut self, run: u64, text: impl FnOnce(u64) -> String) -> Result<u64> {
        let n = self.numbered.entry(run).or_default();
        *n += 1;
        let (n, text) = (*n, text(*n));
        if self.spill.pending > 0 || self.bytes + text.len() > self.limit {
            self.spill_line(run, n, &text)?;
        } else {
            self.bytes += text.len();
            self.memory.push_back(Entry { run, n, text, sent: false });
        }
        Ok(n)
    }

    fn spill_line(&mut self, run: u64, n: u64, text: &str) -> Result<()> {
        let spill = &mut self.spill;
        if spill.file.is_none() {
            let file = OpenOptions::new()
                .create(true)
                .read(true)
                .write(true)
                .truncate(true)
                .open(&spill.path)
                .with_context(|| format!("cannot open the spill file {}", spill.path.display()))?;
            spill.file = Some(file);
            spill.read_at = 0;
        }
        let file = spill.file.as_mut().expect("opened above");
        file.seek(SeekFrom::End(0))?;
        // The JSON text has no newline of its own.
        writeln!(file, "{run} {n} {text}").with_context(|| format!("writing {}", spill.path.display()))?;
        spill.pending += 1;
        Ok(())
    }

    /// The lab has `run`'s messages up to `n`.
    pub fn ack(&mut self, run: u64, n: u64) -> Result<()> {
        let acked = self.acked.entry(run).or_default();
        *acked = (*acked).max(n);
        let bytes = &mut self.bytes;
        self.memory.retain(|e| {
            let keep = !(e.run == run && e.n <= n);
            if !keep {
                *bytes -= e.text.len();
            }
            keep
        });
        self.refill()
    }

    /// Drops every message of `run`, sent or not.
    pub fn forget(&mut self, run: u64) -> Result<()> {
        self.ack(run, u64::MAX)
    }

    /// Brings spilled messages back while memory is under half its limit.
    fn refill(&mut self) -> Result<()> {
        if self.spill.pending == 0 || self.bytes >= self.limit / 2 {
            return Ok(());
        }
        let Some(file) = self.spill.file.as_mut() else { return Ok(()) };
        file.seek(SeekFrom::Start(self.spill.read_at))?;
        let mut reader = BufReader::new(&*file);
        let mut line = String::new();
        while self.spill.pending > 0 && self.bytes < self.limit {
            line.clear();
            let read = reader.read_line(&mut line)?;
            if read == 0 {
                break;
            }
            self.spill.read_at += read as u64;
            self.spill.pending -= 1;
            let mut parts = line.trim_end_matches('\n').splitn(3, ' ');
            let (Some(run), Some(n), Some(text)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let (Ok(run), Ok(n)) = (run.parse::<u64>(), n.parse::<u64>()) else { continue };
            if self.acked.get(&run).is_some_and(|&a| n <= a) {
                continue;
            }
            self.bytes += text.len();
            self.memory.push_back(Entry { run, n, text: text.to_string(), sent: false });
        }
        if self.spill.pending == 0 {
            // Everything is back in memory: the file starts over.
            if let Some(file) = self.spill.file.as_mut() {
                file.set_len(0)?;
            }
            self.spill.read_at = 0;
        }
        Ok(())
    }

    /// Messages not sent on this connection yet, oldest first, at most `max`; they count
    /// as sent from now on.
    pub fn take_unsent(&mut self, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for e in self.memory.iter_mut().filter(|e| !e.sent).take(max) {
            e.sent = true;
            out.push(e.text.clone());
        }
        out
    }

    /// A new connection: everything unacknowledged is to be sent again.
    pub fn resend_all(&mut self) {
        for e in &mut self.memory {
            e.sent = false;
        }
    }

    /// The lab has received `run`'s messages up to `n` (not yet committed them): they are
    /// not sent again on this connection.
    pub fn mark_sent(&mut self, run: u64, n: u64) {
        for e in self.memory.iter_mut().filter(|e| e.run == run && e.n <= n) {
            e.sent = true;
        }
    }

    /// Runs with messages the lab has not acknowledged.
    pub fn runs(&self) -> HashSet<u64> {
        let spilled = self.spill.pending > 0;
        let mut runs: HashSet<u64> = self.memory.iter().map(|e| e.run).collect();
        if spilled {
            runs.extend(self.numbered.iter().filter(|(r, n)| self.acked.get(r).is_none_or(|a| a < n)).map(|(r, _)| *r));
        }
        runs
    }

    /// Bytes held in memory, and lines waiting in the spill file.
    pub fn size(&self) -> (usize, usize) {
        (self.bytes, self.spill.pending)
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        if self.spill.file.take().is_some() {
            let _ = std::fs::remove_file(&self.spill.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox(limit: usize) -> (Outbox, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (Outbox::new(dir.path().join("spill.jsonl"), limit), dir)
    }

    fn push(o: &mut Outbox, run: u64, body: &str) -> u64 {
        o.push(run, |n| format!("{{\"run\":{run},\"n\":{n},\"body\":\"{body}\"}}")).unwrap()
    }

    #[test]
    fn messages_are_numbered_per_run_and_kept_until_acknowledged() {
        let (mut o, _dir) = outbox(1 << 20);
        assert_eq!((push(&mut o, 1, "a"), push(&mut o, 2, "b"), push(&mut o, 1, "c")), (1, 1, 2));
        assert_eq!(o.take_unsent(10).len(), 3);
        assert!(o.take_unsent(10).is_empty(), "sent once per connection");
        o.ack(1, 1).unwrap();
        o.resend_all();
        let again = o.take_unsent(10);
        assert_eq!(again.len(), 2);
        assert!(again[0].contains(r#""run":2"#) && again[1].contains(r#""n":2"#), "{again:?}");
        assert_eq!(o.runs(), HashSet::from([1, 2]));
        o.forget(2).unwrap();
        o.ack(1, 2).unwrap();
        assert!(o.runs().is_empty());
        assert_eq!(o.size(), (0, 0));
    }

    #[test]
    fn past_its_limit_it_spills_to_a_file_and_loses_nothing() {
        let (mut o, dir) = outbox(200);
        for i in 0..50 {
            push(&mut o, 7, &format!("message {i}"));
        }
        let (bytes, spilled) = o.size();
        assert!(bytes <= 200 && spilled > 40, "{bytes} B in memory, {spilled} spilled");
        assert!(dir.path().join("spill.jsonl").exists());
        assert_eq!(o.runs(), HashSet::from([7]));
        // The lab takes them in order, acknowledging as it goes.
        let mut got = Vec::new();
        let mut rounds = 0;
        while got.len() < 50 {
            let batch = o.take_unsent(3);
            assert!(!batch.is_empty(), "ran dry after {}", got.len());
            got.extend(batch);
            let last = got.len() as u64;
            o.ack(7, last).unwrap();
            rounds += 1;
        }
        let expected: Vec<String> = (0..50).map(|i| format!("\"body\":\"message {i}\"")).collect();
        for (g, e) in got.iter().zip(&expected) {
            assert!(g.contains(e), "{g} should hold {e}");
        }
        assert!(rounds > 1);
        assert_eq!(o.size(), (0, 0));
        // Spilling again after the file emptied starts it over.
        for i in 0..20 {
            push(&mut o, 8, &format!("again {i}"));
        }
        o.ack(8, 20).unwrap();
        assert_eq!(o.size(), (0, 0));
    }

    #[test]
    fn spilled_messages_the_lab_already_has_are_not_sent() {
        let (mut o, _dir) = outbox(100);
        for i in 0..10 {
            push(&mut o, 3, &format!("m{i}"));
        }
        // A restarted lab says it has up to 8 (committed before it died).
        o.ack(3, 8).unwrap();
        o.resend_all();
        let rest = o.take_unsent(100);
        assert_eq!(rest.len(), 2, "{rest:?}");
        assert!(rest[0].contains(r#""n":9"#));
    }

    #[test]
    fn what_the_lab_received_is_not_resent_but_kept_until_committed() {
        let (mut o, _dir) = outbox(1 << 20);
        for i in 0..5 {
            push(&mut o, 1, &format!("m{i}"));
        }
        o.take_unsent(10);
        // Reconnected: the lab has received 4, committed 2.
        o.ack(1, 2).unwrap();
        o.resend_all();
        o.mark_sent(1, 4);
        let rest = o.take_unsent(10);
        assert_eq!(rest.len(), 1);
        assert!(rest[0].contains(r#""n":5"#));
        assert_eq!(o.runs(), HashSet::from([1]));
        // Were the lab to restart now, 3 and 4 are still here to send.
        o.resend_all();
        assert_eq!(o.take_unsent(10).len(), 3);
    }
}
