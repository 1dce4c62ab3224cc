//! Property-based tests of the Prolog parser (knowledge bases and queries from users):
//! random and mutated text never panics; what is not a program is an error at a line and
//! a column. Each property tries 2,000 inputs in CI (`cargo xtask fuzz --cases N` sets
//! N); a failing case is kept in `prolog_fuzz.regressions` beside this file and tried
//! first from then on.

mod fuzzing;

use hotlab_workloads::proof::prolog::syntax::parse_program;
use proptest::prelude::*;

proptest! {
    #![proptest_config(fuzzing::config(2_000))]

    #[test]
    fn any_text_is_a_program_or_an_error_at_a_position(text in "[a-zA-Z0-9_(),.:;| %\n'\"\\\\-]{0,200}") {
        if let Err(e) = parse_program(&text) {
            prop_assert!(e.line >= 1 && e.column >= 1 && !e.message.is_empty());
        }
    }

    #[test]
    fn a_program_with_one_character_changed_is_a_program_or_an_error(
        at in 0usize..200,
        with in "[ -~\n]",
        delete in any::<bool>(),
    ) {
        let program = "parent(tom, bob).\nparent(bob, ann).\n% a comment\nancestor(X, Y) :- parent(X, Y).\nancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).\n";
        let mut chars: Vec<char> = program.chars().collect();
        let at = at % chars.len();
        if delete {
            chars.remove(at);
        } else {
            chars[at] = with.chars().next().unwrap_or(' ');
        }
        let text: String = chars.into_iter().collect();
        if let Err(e) = parse_program(&text) {
            prop_assert!(e.line >= 1 && e.column >= 1, "{e:?}");
        }
    }
}
