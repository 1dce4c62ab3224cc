//! The Prolog subset of the proof environment: facts and Horn rules over constants and
//! variables, predicates of arity 1 or 2, `%` comments. No function symbols, arithmetic,
//! negation, cut, lists, quoted atoms or directives: each is rejected with its line,
//! column and what is not supported.
//!
//! Printing a parsed program ([`std::fmt::Display`]) gives text that parses back equal.

use std::fmt;

/// A constant (`alice`) or a variable (`X`, `_`; each `_` is a distinct variable).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Term {
    Const(String),
    Var(String),
}

/// `pred(arg)` or `pred(arg, arg)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Atom {
    pub pred: String,
    pub args: Vec<Term>,
}

/// `head.` (a fact) or `head :- body₁, …, bodyₙ.` (a rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clause {
    pub head: Atom,
    pub body: Vec<Atom>,
}

/// A knowledge base: its clauses in file order (resolution tries them in this order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    pub clauses: Vec<Clause>,
}

/// Where the text leaves the subset, and how.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Const(s) | Term::Var(s) => f.write_str(s),
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.pred)?;
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{a}")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for Clause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.head)?;
        for (i, b) in self.body.iter().enumerate() {
            f.write_str(if i == 0 { " :- " } else { ", " })?;
            write!(f, "{b}")?;
        }
        f.write_str(".")
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.clauses.iter().try_for_each(|c| writeln!(f, "{c}"))
    }
}

impl std::str::FromStr for Program {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Self, ParseError> {
        parse_program(text)
    }
}

impl std::str::FromStr for Atom {
    type Err = ParseError;
    /// One atom, e.g. a query `ancestor(ann, bob)` (a trailing `.` is allowed).
    fn from_str(text: &str) -> Result<Self, ParseError> {
        let mut p = Parser::new(text);
        let atom = p.atom()?;
        p.skip_space_and_comments();
        if p.peek() == Some('.') {
            p.bump();
            p.skip_space_and_comments();
        }
        match p.peek() {
            None => Ok(atom),
            Some(_) => Err(p.error("expected the end of the query after one atom")),
        }
    }
}

/// Parses a knowledge base.
pub fn parse_program(text: &str) -> Result<Program, ParseError> {
    let mut p = Parser::new(text);
    let mut clauses = Vec::new();
    loop {
        p.skip_space_and_comments();
        if p.peek().is_none() {
            return Ok(Program { clauses });
        }
        clauses.push(p.clause()?);
    }
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
    column: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self { chars: text.chars().peekable(), line: 1, column: 1 }
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError { line: self.line, column: self.column, message: message.into() }
    }

    fn skip_space_and_comments(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.bump();
            } else if c == '%' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else {
                break;
            }
        }
    }

    /// What a character outside the subset means, for the error message.
    fn unsupported(&self, c: char) -> ParseError {
        let what = match c {
            '!' => "cut (!) is not supported".to_string(),
            ';' => "disjunction (;) is not supported".to_string(),
            '[' | ']' | '|' => "lists are not supported".to_string(),
            '\'' | '"' | '`' => "quoted atoms and strings are not supported".to_string(),
            '\\' => "negation (\\+) is not supported".to_string(),
            '/' => "block comments are not supported (use %)".to_string(),
            '0'..='9' => "numbers are not supported (constants are lowercase names)".to_string(),
            '+' | '-' | '*' | '=' | '<' | '>' => "arithmetic and comparison are not supported".to_string(),
            '{' | '}' => "curly terms are not supported".to_string(),
            c => format!("unexpected character '{c}'"),
        };
        self.error(what)
    }

    fn name(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek().filter(|&c| is_name_char(c)) {
            s.push(c);
            self.bump();
        }
        s
    }

    fn expect(&mut self, want: char, context: &str) -> Result<(), ParseError> {
        self.skip_space_and_comments();
        match self.peek() {
            Some(c) if c == want => {
                self.bump();
                Ok(())
            }
            Some(c) if !is_name_char(c) && !"(),.:".contains(c) => Err(self.unsupported(c)),
            Some(c) => Err(self.error(format!("expected '{want}' {context}, found '{c}'"))),
            None => Err(self.error(format!("expected '{want}' {context}, found the end of the file"))),
        }
    }

    fn clause(&mut self) -> Result<Clause, ParseError> {
        if self.peek() == Some(':') {
            return Err(self.error("directives (:- …) are not supported"));
        }
        let head = self.atom()?;
        self.skip_space_and_comments();
        let mut body = Vec::new();
        if self.peek() == Some(':') {
            self.bump();
            if self.peek() != Some('-') {
                return Err(self.error("expected ':-' after the head"));
            }
            self.bump();
            loop {
                body.push(self.atom()?);
                self.skip_space_and_comments();
                match self.peek() {
                    Some(',') => {
                        self.bump();
                    }
                    _ => break,
                }
            }
        }
        self.expect('.', "at the end of the clause")?;
        Ok(Clause { head, body })
    }

    fn atom(&mut self) -> Result<Atom, ParseError> {
        self.skip_space_and_comments();
        let (line, column) = (self.line, self.column);
        match self.peek() {
            Some(c) if c.is_ascii_lowercase() => {}
            Some(c) if c.is_ascii_uppercase() || c == '_' => {
                return Err(self.error("a variable cannot stand for an atom (no meta-calls)"));
            }
            Some(c) => return Err(self.unsupported(c)),
            None => return Err(self.error("expected an atom, found the end of the file")),
        }
        let pred = self.name();
        self.skip_space_and_comments();
        if let Some(c) = self.peek().filter(|c| "=<>+-*\\".contains(*c)) {
            return Err(self.unsupported(c));
        }
        if pred == "not" || pred == "is" {
            return Err(ParseError {
                line,
                column,
                message: format!("'{pred}' is not supported (no negation or arithmetic)"),
            });
        }
        self.skip_space_and_comments();
        if self.peek() != Some('(') {
            return Err(ParseError {
                line,
                column,
                message: format!("'{pred}' has no arguments: predicates of arity 0 are not supported (arity 1 or 2)"),
            });
        }
        self.bump();
        let mut args = vec![self.term()?];
        loop {
            self.skip_space_and_comments();
            match self.peek() {
                Some(',') => {
                    self.bump();
                    args.push(self.term()?);
                }
                Some(')') => {
                    self.bump();
                    break;
                }
                Some('(') => return Err(self.error("function symbols are not supported")),
                Some(c) if !is_name_char(c) => return Err(self.unsupported(c)),
                Some(c) => {
                    return Err(self.error(format!("expected ',' or ')' in the arguments of '{pred}', found '{c}'")))
                }
                None => return Err(self.error(format!("unclosed '(' in '{pred}'"))),
            }
        }
        if args.len() > 2 {
            return Err(ParseError {
                line,
                column,
                message: format!("'{pred}' has {} arguments: only arity 1 or 2 is supported", args.len()),
            });
        }
        Ok(Atom { pred, args })
    }

    fn term(&mut self) -> Result<Term, ParseError> {
        self.skip_space_and_comments();
        let term = match self.peek() {
            Some(c) if c.is_ascii_lowercase() => Term::Const(self.name()),
            Some(c) if c.is_ascii_uppercase() || c == '_' => Term::Var(self.name()),
            Some(c) => return Err(self.unsupported(c)),
            None => return Err(self.error("expected an argument, found the end of the file")),
        };
        self.skip_space_and_comments();
        if self.peek() == Some('(') {
            return Err(self.error("function symbols are not supported"));
        }
        Ok(term)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAMILY: &str = "% a small family\n\
        parent(ann, bob).  parent(bob, cid).\n\
        male(bob). female(ann).\n\
        grandparent(X, Z) :- parent(X, Y), parent(Y, Z).\n\
        ancestor(X, Y) :- parent(X, Y).\n\
        ancestor(X, Y) :- parent(X, Z), ancestor(Z, Y). % recursive\n\
        related(_, _Anyone) :- male(_).\n";

    #[test]
    fn parses_facts_rules_and_comments_and_prints_back_equal() {
        let p: Program = FAMILY.parse().unwrap();
        assert_eq!(p.clauses.len(), 8);
        assert_eq!(
            p.clauses[0].head,
            Atom { pred: "parent".into(), args: vec![Term::Const("ann".into()), Term::Const("bob".into())] }
        );
        assert_eq!(p.clauses[4].body.len(), 2);
        assert_eq!(p.clauses[4].body[1].args[0], Term::Var("Y".into()));
        let printed = p.to_string();
        assert!(printed.contains("grandparent(X, Z) :- parent(X, Y), parent(Y, Z)."), "{printed}");
        assert_eq!(printed.parse::<Program>().unwrap(), p);
        assert_eq!("ancestor(ann, cid).".parse::<Atom>().unwrap().to_string(), "ancestor(ann, cid)");
    }

    fn rejected(text: &str) -> ParseError {
        text.parse::<Program>().expect_err(text)
    }

    #[test]
    fn every_unsupported_construct_names_its_line_and_column() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("p(a).\nq(f(a)).", 2, 4, "function symbols"),
            ("p(X) :- X is 1.", 1, 9, "variable cannot stand"),
            ("p(X) :- is(X, a).", 1, 9, "'is' is not supported"),
            ("p(a) :- \\+ q(a).", 1, 9, "negation"),
            ("p(a) :- q(a), !.", 1, 15, "cut"),
            ("p(a) :- q(a) ; r(a).", 1, 14, "disjunction"),
            ("p([a]).", 1, 3, "lists"),
            ("p('A b').", 1, 3, "quoted atoms"),
            ("p(1).", 1, 3, "numbers"),
            ("p(a) :- X = a.", 1, 9, "variable cannot stand"),
            ("p(a) :- q(a), a < b.", 1, 17, "arithmetic and comparison"),
            ("p(a, b, c).", 1, 1, "only arity 1 or 2"),
            ("halt.", 1, 1, "arity 0"),
            (":- dynamic(p).", 1, 1, "directives"),
            ("p(a)", 1, 5, "expected '.'"),
            ("p(a) :- not(q(a)).", 1, 9, "'not' is not supported"),
            ("/* c */ p(a).", 1, 1, "block comments"),
        ];
        for &(text, line, column, what) in cases {
            let e = rejected(text);
            assert!(e.message.contains(what), "{text:?}: {e}");
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
        }
    }
}
