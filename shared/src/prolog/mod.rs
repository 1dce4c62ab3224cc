//! The proof environment's logic: a Prolog subset ([`syntax`]).
//!
//! Seed 000's scenario is PPO over proof search: the state is a goal list, an action
//! picks one of the SLD successors. This module holds the language; resolution, the
//! world generators and the env build on it.

pub mod syntax;

pub use syntax::{parse_program, Atom, Clause, ParseError, Program, Term};
