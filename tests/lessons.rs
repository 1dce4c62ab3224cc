//! The lessons on this machine: every lesson's bottleneck shows on its slow setting (what
//! a lesson counts, which does not depend on this machine's speed or load), a lesson runs
//! end to end from the CLI, and a record of what a machine measured is written and read.
//! The audit's verdicts on changes whose truth is known, which compare timings, are
//! tests/verdicts.rs (a binary that runs alone).

mod common;
use common::*;
use hotlab_report::lessons;

/// `hotlab lesson check`: each lesson's slow setting and each fix, one short run each. A
/// signature that counts (syncs, copies, round trips, calls per env step) must show: a
/// lesson that stops showing its bottleneck fails here. A signature that times (µs per call,
/// a phase's share) is measured and reported but not asserted: on a loaded 2-core machine a
/// 0.4-second run's timing is not a fact (`hotlab lesson check` is its benchmark). A lesson
/// that needs a GPU is skipped, saying why, on a machine without CUDA (`gpu-check` checks it there).
#[test]
fn every_lesson_shows_its_signature_on_the_slow_setting() {
    let out = run(hotlab().args(["lesson", "check", "--seconds", "0.4", "--json"]));
    let checks = last_json(&out);
    let checks = checks.as_array().unwrap_or_else(|| panic!("{}", stderr(&out)));
    assert_eq!(checks.len(), lessons::LESSONS.len());
    let cuda = tch::Cuda::is_available();
    let mut timed_not_shown = Vec::new();
    for c in checks {
        let lesson = lessons::find(c["lesson"].as_str().unwrap()).unwrap();
        if lesson.needs_gpu() && !cuda {
            assert!(c["skipped"].as_str().is_some_and(|s| s.contains("needs a CUDA GPU")), "{c}");
            continue;
        }
        let figures = c["figures"].as_array().unwrap();
        assert_eq!(figures.len(), 1 + lesson.variants.len());
        if lesson.signature.measure.is_timed() {
            assert!(figures.iter().all(|f| f["value"].as_f64().is_some_and(|v| v > 0.0)), "{c}");
            if c["shows"] != true {
                timed_not_shown.push(lesson.id);
            }
        } else {
            assert_eq!(c["shows"], true, "{c}");
        }
    }
    // The command exits 1 when a signature does not show; here only a timed one may not.
    assert_eq!(out.status.success(), timed_not_shown.is_empty(), "{timed_not_shown:?}: {}", stderr(&out));
    if !timed_not_shown.is_empty() {
        eprintln!("timed signatures that did not show on this run: {timed_not_shown:?}");
    }
}

/// `hotlab lesson run ID --json`: the audit of its fix and the signature's figures.
#[test]
fn a_lesson_runs_from_the_cli() {
    let out = run(hotlab().args(["lesson", "run", "batch-size", "--repeats", "2", "--seconds", "0.3", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let o = last_json(&out);
    assert_eq!(o["lesson"], "batch-size");
    assert_eq!(o["audit"]["repeats"], 2);
    assert_eq!(o["audit"]["changes"][0]["change"], "envs=64");
    assert_eq!(o["signature"][0]["setting"], "baseline");
    assert_eq!(o["signature"][0]["value"], 1.0, "one env: a forward per env step");
    assert_eq!(o["shows"], true, "{o}");

    let out = run(hotlab().args(["lesson", "list", "--json"]));
    let list = last_json(&out);
    assert!(list.as_array().unwrap().iter().any(|l| l["id"] == "worker-waits" && l["row"] == 1), "{list}");
    for (args, named) in [
        (vec!["lesson", "run", "nope"], "worker-waits"),
        (vec!["lesson", "run", "batch-size", "--set", "envs"], "--set"),
        (vec!["lesson", "run", "batch-size", "--set", "speed=3"], "speed"),
        (vec!["lesson", "run", "batch-size", "--repeats", "1"], "--repeats"),
    ] {
        let out = run(hotlab().args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
    if !tch::Cuda::is_available() {
        // A lesson whose bottleneck needs a GPU is refused before anything runs.
        let out = run(hotlab().args(["lesson", "run", "replay-copies"]));
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("needs a CUDA GPU"), "{}", stderr(&out));
    }
}

/// Issue 38: `lesson check --record FILE` writes what this machine measured (its device, the
/// day, the signature, with `--verdicts` the audit's verdicts and the budget they were
/// measured at), merging lesson by lesson; `lesson list --json` carries the record per
/// lesson as `gpu_result` (null where nothing is recorded); a file that is not a record is
/// refused, naming the flag.
#[test]
fn a_lessons_record_is_written_merged_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("record.json");
    let f = file.to_str().unwrap();
    let out = run(hotlab().args(["lesson", "check", "per-item-sync", "--seconds", "0.3", "--record", f]));
    assert!(out.status.success(), "{}", stderr(&out));
    let args = ["lesson", "check", "batch-size", "--seconds", "0.3", "--record", f, "--verdicts", "--repeats", "2"];
    let out = run(hotlab().args(args));
    assert!(out.status.success(), "{}", stderr(&out));
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let ids: Vec<&str> = record.as_array().unwrap().iter().map(|r| r["lesson"].as_str().unwrap()).collect();
    assert_eq!(ids, ["per-item-sync", "batch-size"], "merged, in the catalogue's order");
    let cpu = hotlab_train::system::info().devices[0].name.clone();
    for r in record.as_array().unwrap() {
        assert_eq!(r["device"], cpu.as_str());
        let date = r["date"].as_str().unwrap();
        assert!(date.len() == 10 && date.starts_with("20") && date.as_bytes()[4] == b'-', "{date}");
        assert_eq!(r["figures"].as_array().unwrap().len(), 2, "{r}");
    }
    assert!(record[0].get("verdicts").is_none(), "a quick check has no verdict");
    let v = &record[1]["verdicts"][0];
    assert_eq!(v["change"], "envs=64");
    assert_eq!((v["budget"]["seconds"].as_f64(), v["budget"]["repeats"].as_u64()), (Some(0.3), Some(2)), "{v}");
    assert!(
        v["verdict"].is_string() && v["ratio"]["low"].as_f64().unwrap() <= v["ratio"]["high"].as_f64().unwrap(),
        "{v}"
    );

    let list = last_json(&run(hotlab().args(["lesson", "list", "--json", "--records", f])));
    let of = |id: &str| list.as_array().unwrap().iter().find(|l| l["id"] == id).unwrap()["gpu_result"].clone();
    assert_eq!(of("batch-size")["device"], cpu.as_str());
    assert!(of("worker-waits").is_null(), "nothing recorded for it in this file");
    // Without --records: the repository's record, made on an H100.
    let shipped = last_json(&run(hotlab().args(["lesson", "list", "--json"])));
    let replay = shipped.as_array().unwrap().iter().find(|l| l["id"] == "replay-copies").unwrap();
    assert_eq!(replay["gpu_result"]["device"], "NVIDIA H100 80GB HBM3");

    std::fs::write(&file, "not json").unwrap();
    for args in
        [vec!["lesson", "list", "--json", "--records", f], vec!["lesson", "check", "per-item-sync", "--record", f]]
    {
        let out = run(hotlab().args(&args));
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(
            stderr(&out).contains("--record") && stderr(&out).contains("not a lesson record"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not json", "a bad record is never overwritten");
}
