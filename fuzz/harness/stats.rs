//! The differences listed in `fuzz/DIFFERENCES.md` (justified, known bugs) and the figures
//! per class, with the smallest reproducer of each.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::case::Case;
use super::check::Class;

/// The keys listed in DIFFERENCES.md: `- \`key\`` lines under `## Justified…` and
/// `## Known bugs…` headings.
#[derive(Default, Debug)]
pub struct Listed {
    pub justified: BTreeSet<String>,
    pub bugs: BTreeSet<String>,
}

pub fn read_listed(path: &Path) -> Listed {
    let mut l = Listed::default();
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut section = 0;
    for line in text.lines() {
        if line.starts_with("## ") {
            let h = line.to_lowercase();
            section = if h.contains("justified") {
                1
            } else if h.contains("bug") {
                2
            } else {
                0
            };
            continue;
        }
        if let Some(rest) = line.strip_prefix("- `") {
            if let Some(end) = rest.find('`') {
                let key = rest[..end].to_string();
                match section {
                    1 => l.justified.insert(key),
                    2 => l.bugs.insert(key),
                    _ => false,
                };
            }
        }
    }
    l
}

impl Listed {
    pub fn status(&self, c: &Class) -> &'static str {
        let k = c.key();
        if !c.needs_listing() {
            "ok"
        } else if self.justified.contains(&k) {
            "justified"
        } else if self.bugs.contains(&k) {
            "known bug"
        } else {
            "UNLISTED"
        }
    }
}

/// Per class key: the class, its count, its smallest case and why.
pub type ClassCounts = BTreeMap<String, (Class, u64, Option<(Case, String)>)>;

/// Counts per class, with the smallest reproducer of each.
#[derive(Default)]
pub struct Stats {
    pub cases: u64,
    pub classes: ClassCounts,
}

impl Stats {
    pub fn add(&mut self, case: &Case, class: Class, why: String) {
        self.cases += 1;
        let e = self.classes.entry(class.key()).or_insert((class, 0, None));
        e.1 += 1;
        if e.0 != Class::Agree && e.0 != Class::AgreeNoop {
            let smaller =
                e.2.as_ref()
                    .is_none_or(|(c, _)| case.patch.len() < c.patch.len());
            if smaller {
                e.2 = Some((case.clone(), why));
            }
        }
    }

    pub fn count(&self, pred: impl Fn(&Class) -> bool) -> u64 {
        self.classes
            .values()
            .filter(|(c, _, _)| pred(c))
            .map(|(_, n, _)| n)
            .sum()
    }

    /// The figures, one class a line.
    pub fn summary(&self, listed: &Listed) -> String {
        let mut s = String::new();
        let inv = |c: &Class| c.is_invariant_violation();
        s.push_str(&format!(
            "cases: {}\npanics: {}\noutside writes: {}\nchanged after refusal: {}\ncheck mode wrote: {}\n",
            self.cases,
            self.count(|c| matches!(c, Class::Panic(_))),
            self.count(|c| matches!(c, Class::OutsideWrite(_))),
            self.count(|c| matches!(c, Class::ChangedAfterRefusal(_))),
            self.count(|c| matches!(c, Class::CheckWrote(_))),
        ));
        s.push_str(&format!(
            "agreements: {}\ninvariant violations: {}\nunlisted differences: {}\nclasses:\n",
            self.count(|c| matches!(c, Class::Agree | Class::AgreeNoop)),
            self.count(inv),
            self.unlisted(listed).len(),
        ));
        for (k, (c, n, _)) in &self.classes {
            s.push_str(&format!("  {n:>7}  [{}] {k}\n", listed.status(c)));
        }
        s
    }

    pub fn unlisted(&self, listed: &Listed) -> Vec<String> {
        self.classes
            .iter()
            .filter(|(_, (c, _, _))| listed.status(c) == "UNLISTED")
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Writes the smallest reproducer of each class that is not an agreement into `dir`.
    pub fn write_reproducers(&self, dir: &Path, listed: &Listed) {
        fs::create_dir_all(dir).unwrap();
        for (i, (k, (c, n, r))) in self.classes.iter().enumerate() {
            let Some((case, why)) = r else { continue };
            let slug: String = k
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() {
                        ch.to_ascii_lowercase()
                    } else {
                        '-'
                    }
                })
                .collect();
            let slug: String = slug
                .split('-')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("-");
            let slug: String = slug.chars().take(60).collect();
            let comment = format!(
                "class: {k}\nstatus: {}\nseen: {n} times\norigin: {}\nwhy: {}",
                listed.status(c),
                case.origin,
                why.lines().next().unwrap_or("")
            );
            fs::write(
                dir.join(format!("{i:03}-{slug}.case")),
                case.to_file(&comment),
            )
            .unwrap();
        }
    }
}
