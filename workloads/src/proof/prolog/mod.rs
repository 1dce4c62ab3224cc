//! The proof environment's logic: a Prolog subset ([`syntax`]), compiled knowledge bases
//! and SLD resolution ([`kb`]), depth-bounded proof search with a proof checker
//! ([`prove`]), and seeded generated worlds with their query sets ([`worlds`]).
//!
//! Seed 000's scenario is PPO over proof search: the state is a goal list, an action
//! picks one of the SLD successors.

pub mod kb;
pub mod prove;
pub mod syntax;
pub mod worlds;

pub use kb::{Goals, Kb};
pub use syntax::{parse_program, Atom, Clause, ParseError, Program, Term};
