//! Our prover against SWI-Prolog (Debian's `swi-prolog-nox`, installed by `cargo xtask
//! test`): on generated worlds, provability within the depth bound must agree with a
//! depth-bounded meta-interpreter that offers the same successors (SLD on the first goal,
//! clause order, at most 10 atoms and 8 variables per goal list, the first 20 kept), and
//! every proof we return must check step by step. The `prove` command is run end to end.

mod common;

use common::{hotlab, run, stderr, stdout};
use hotlab_workloads::proof::prolog::kb::{Kb, MAX_ATOMS, MAX_VARS};
use hotlab_workloads::proof::prolog::prove::{annotate, check, prove, SUCCESSORS};
use hotlab_workloads::proof::prolog::worlds::{queries, WorldSpec};
use hotlab_workloads::proof::prolog::{Atom, Program};
use std::fmt::Write;
use std::process::Command;

/// The knowledge base as `c(Head, Body)` data plus the meta-interpreter, then one line
/// per query: its index and 1 (provable within `depth`) or 0.
fn swi_program(program: &Program, queries: &[Atom], depth: usize) -> String {
    let mut text = String::from(":- style_check(-singleton).\n:- style_check(-discontiguous).\n");
    for clause in &program.clauses {
        let body: Vec<String> = clause.body.iter().map(ToString::to_string).collect();
        let _ = writeln!(text, "c({}, [{}]).", clause.head, body.join(", "));
    }
    for (i, q) in queries.iter().enumerate() {
        let _ = writeln!(text, "q({i}, {q}).");
    }
    let _ = write!(
        text,
        "
take(0, _, []) :- !.
take(_, [], []) :- !.
take(N, [X|Xs], [X|Ys]) :- N1 is N - 1, take(N1, Xs, Ys).
ok(New) :- length(New, L), L =< {MAX_ATOMS}, term_variables(New, Vs), length(Vs, NV), NV =< {MAX_VARS}.
prove([], _).
prove([G|Rest], D) :-
    D > 0, D1 is D - 1,
    findall(New, (c(G, Body), append(Body, Rest, New), ok(New)), All),
    take({SUCCESSORS}, All, Kept),
    member(N, Kept),
    prove(N, D1).
main :- forall(q(I, G), ((prove([G], {depth}) -> R = 1 ; R = 0), format(\"~w ~w~n\", [I, R]))).
"
    );
    text
}

fn swi_answers(program: &Program, queries: &[Atom], depth: usize) -> Vec<bool> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kb.pl");
    std::fs::write(&file, swi_program(program, queries, depth)).unwrap();
    let out = Command::new("swipl")
        .args(["-q", "-g", "main", "-t", "halt"])
        .arg(&file)
        .output()
        .expect("swipl runs (cargo xtask test installs swi-prolog-nox)");
    assert!(out.status.success(), "swipl failed: {}", stderr(&out));
    let text = stdout(&out);
    let answers: Vec<bool> = text.lines().map(|l| l.ends_with(" 1")).collect();
    assert_eq!(answers.len(), queries.len(), "one answer per query from swipl:\n{text}");
    answers
}

/// ≥ 200 KB/query pairs of one kind of world: a few seeded worlds, their query sets, plus
/// non-ground queries that bind variables on the way.
fn agree(world: &str, sizes: &[(usize, u64)], depth: usize) {
    let (mut pairs, mut provable) = (0, 0);
    for &(size, seed) in sizes {
        let spec: WorldSpec =
            format!("{world}:{}={size},seed={seed}", if world == "family" { "people" } else { "places" })
                .parse()
                .unwrap();
        let w = spec.generate();
        let set = queries(&w, 60, depth, seed);
        let asked: Vec<Atom> = set.train.iter().chain(&set.test).map(|q| q.atom.clone()).collect();
        let theirs = swi_answers(&w.program, &asked, depth);
        let mut kb = Kb::new(&w.program);
        for (atom, swi) in asked.iter().zip(theirs) {
            let goals = kb.query(atom).unwrap();
            let mut ours = prove(&kb, &goals, depth, SUCCESSORS);
            assert_eq!(ours.provable, swi, "{spec}: {atom} within depth {depth}: ours {}, SWI {swi}", ours.provable);
            if ours.provable {
                assert!(ours.proof.len() <= depth);
                annotate(&mut ours, &w.program.clauses);
                check(&w.program.clauses, atom, &ours.proof).unwrap_or_else(|e| panic!("{spec}: {atom}: {e}"));
                provable += 1;
            }
            pairs += 1;
        }
    }
    assert!(pairs >= 200, "{pairs} pairs");
    assert!(provable >= pairs / 3 && provable <= pairs * 2 / 3, "{provable} of {pairs} provable");
}

#[test]
fn family_worlds_agree_with_swi_prolog() {
    agree("family", &[(30, 1), (40, 2), (50, 3), (60, 4)], 8);
}

#[test]
fn geography_worlds_agree_with_swi_prolog() {
    agree("geography", &[(40, 1), (60, 2), (80, 3), (100, 4)], 7);
}

#[test]
fn the_successor_limit_is_the_same_on_both_sides() {
    // 25 ways to start, only the 21st leads to a proof: beyond the first 20 it is cut off.
    let mut text: String = (0..25).map(|i| format!("r(a, c{i}).\n")).collect();
    text.push_str("s(c20).\np(X) :- r(X, Y), s(Y).\n");
    let program: Program = text.parse().unwrap();
    let query: Atom = "p(a)".parse().unwrap();
    let mut kb = Kb::new(&program);
    let goals = kb.query(&query).unwrap();
    let ours = prove(&kb, &goals, 5, SUCCESSORS);
    assert_eq!(swi_answers(&program, &[query], 5), vec![ours.provable]);
    assert!(!ours.provable);
    assert_eq!(ours.dropped.cut_off, 5);
}

#[test]
fn the_prove_command_prints_a_checked_proof() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("family.pl");
    std::fs::write(
        &file,
        "parent(ann, bob).\nparent(bob, cid).\n% rules\nancestor(X, Y) :- parent(X, Y).\n\
         ancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).\n",
    )
    .unwrap();
    let out = run(hotlab().args(["prove", "--kb"]).arg(&file).args(["--query", "ancestor(ann, cid)", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["provable"], true);
    let steps = v["proof"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    assert_eq!(steps[0]["clause_text"], "ancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).");
    assert_eq!(steps[3]["resolvent"], "[]");

    let shallow = run(hotlab().args(["prove", "--kb"]).arg(&file).args([
        "--query",
        "ancestor(ann, cid)",
        "--depth",
        "3",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&stdout(&shallow)).unwrap();
    assert_eq!((v["provable"].as_bool(), v["proof"].as_array().map(Vec::len)), (Some(false), Some(0)));

    let text = run(hotlab().args(["prove", "--kb"]).arg(&file).args(["--query", "ancestor(ann, W)"]));
    assert!(stdout(&text).contains("provable within depth 10"), "{}", stdout(&text));

    let bad = run(hotlab().args(["prove", "--kb"]).arg(&file).args(["--query", "ancestor(ann, f(x))"]));
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--query") && stderr(&bad).contains("function symbols"), "{}", stderr(&bad));
    std::fs::write(&file, "parent(ann, bob).\nparent(bob) :- \\+ x.\n").unwrap();
    let bad = run(hotlab().args(["prove", "--kb"]).arg(&file).args(["--query", "parent(ann, bob)"]));
    assert!(stderr(&bad).contains("line 2, column"), "{}", stderr(&bad));
}
