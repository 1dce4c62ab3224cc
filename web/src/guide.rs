//! The guide to the panels (`docs/guide.md`, compiled in): `#/guide/SECTION` renders it
//! and scrolls to the section, and each panel's one line of "what this shows" is its
//! section's own (one text, in the guide), with a link there.

use leptos::prelude::*;

/// The guide, as written in the repository.
const GUIDE: &str = include_str!("../../docs/guide.md");

/// The guide as HTML (its headings carry their `{#id}`s).
pub fn html() -> String {
    let options = pulldown_cmark::Options::ENABLE_HEADING_ATTRIBUTES | pulldown_cmark::Options::ENABLE_TABLES;
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, pulldown_cmark::Parser::new_ext(GUIDE, options));
    out
}

/// A section's "What it shows" paragraph, as one line of plain text.
pub fn shows(section: &str) -> Option<String> {
    let start = GUIDE.find(&format!("{{#{section}}}"))?;
    let rest = &GUIDE[start..];
    let end = rest[1..].find("\n## ").map_or(rest.len(), |e| e + 1);
    let text = &rest[..end];
    let from = text.find("**What it shows:**")? + "**What it shows:**".len();
    let para = text[from..].split("\n\n").next()?;
    let line = para.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(line.replace(['*', '`'], ""))
}

/// A panel's line of what it shows, with its link into the guide.
#[component]
pub fn Explain(section: &'static str) -> impl IntoView {
    view! {
        <p class="explain" data-testid=format!("explain-{section}")>
            {shows(section).unwrap_or_default()}" "
            <a href=format!("#/guide/{section}") data-testid="explain-link">"more in the guide"</a>
        </p>
    }
}

/// `#/guide/SECTION`: the whole guide, scrolled to the section.
#[component]
pub fn Guide(section: String) -> impl IntoView {
    if !section.is_empty() {
        request_animation_frame(move || {
            let element = web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id(&section));
            if let Some(e) = element {
                e.scroll_into_view();
            }
        });
    }
    view! {
        <section class="panel guide" data-testid="guide" inner_html=html()></section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panels the guide explains, by section id (each an `Explain` of the run view).
    const PANELS: &[&str] = &["bottlenecks", "phase-split", "counters", "verdicts", "noise"];

    #[test]
    fn every_panel_has_its_section_and_line_in_the_guide() {
        let html = html();
        for section in PANELS {
            assert!(html.contains(&format!("id=\"{section}\"")), "{section} is a heading's id");
            let line = shows(section).unwrap_or_else(|| panic!("{section} says what it shows"));
            assert!(line.len() > 40 && !line.contains('\n') && !line.contains("**"), "{section}: {line}");
        }
        assert_eq!(shows("nowhere"), None);
        assert!(shows("noise").unwrap().starts_with("the A/A pairs"), "{:?}", shows("noise"));
    }
}
