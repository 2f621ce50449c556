//! `cargo xtask layers [--check]`: gemm-host's module graph, its import
//! circles and its upward imports, against a committed baseline of today's
//! debt (`xtask/layers.txt`).
//!
//! gemm-host is meant to flow one way, operands -> describe -> plan -> exec ->
//! device: no module imports one of a higher layer, and no modules import each
//! other in a circle. Today they do, so this task lets no *new* circle or
//! upward import in, and says when part of the debt is paid.
//!
//! **The graph.** One node per file of gemm-host's module tree, named by its
//! path under `gemm-host/src` without `.rs` (`batch`, `tuning_table`; a
//! folder's `x/mod.rs` is `x`, `x/y.rs` is `x/y`). The tree is read from
//! `lib.rs`'s `mod` declarations (`#[path = ..]` included: `registry_list` is
//! `registry.rs`) and from other files' `mod x;` (`tuning_plan.rs` declares
//! `tuning_table.rs`). `lib.rs` is the root and no node: it only re-exports.
//! An edge `a -> b` is a path in `a`'s code that names an item of `b`:
//! - `crate::b::..` anywhere (use trees too: `use crate::{b, c::d}` names `b`
//!   and `c`), `$crate::` in macros;
//! - a path through `lib.rs`'s re-exports, followed to the module that
//!   defines the item: `crate::Matrix` (`pub use matrix::Matrix`) names
//!   `matrix`, `crate::tuning::Plan` names `tuning_plan`, `crate::registry`
//!   (`pub(crate) use registry_list as registry`) names `registry`;
//! - `super::..` from a file module declared in another file, `self::x::..`
//!   and `x::..` for a file's own file submodule `x`.
//!
//! Comments, doc comments (doc links such as `[crate::Matrix]` in `///`
//! lines), string literals and attributes are not code. Items under
//! `#[cfg(test)]` (a `mod tests` block, wherever it is in the file; a test-only
//! `use`) are skipped: tests may import anything. A `crate::` path that names
//! nothing in `lib.rs`'s tree fails the task, since a missed edge could let a
//! circle through.
//!
//! **Circles.** Tarjan's strongly connected components; an edge between two
//! modules of one component (of more than one module) closes an import
//! circle.
//!
//! **Layers.** The baseline's hand-written `[layers]` section lists the
//! layers lowest first, one a line, `name: module module folder/ ...` (a name
//! ending in `/` takes the folder `x/` and its `x/mod.rs`). A module may import
//! its own layer and those listed before it; an edge to a higher layer is an
//! upward import. Modules in no layer are not checked for that (the output
//! names them).
//!
//! **Baseline.** `xtask/layers.txt`: `#` comments, the `[layers]` section,
//! then one `from -> to` a line under `[circles]` (the edges inside a circle
//! today) and `[upward]` (the upward imports today). Edges not in a circle and
//! not upward are fine and are not listed.
//!
//! Without `--check` the task prints the graph (circles, layers) and rewrites
//! the baseline from it, keeping `[layers]` as written. With `--check` it writes
//! nothing and fails (exit 1), naming each edge, where it is (file:line) and
//! the circle it closes or the layers it crosses, when a circle edge or an
//! upward import is not in the baseline. Baseline edges that are gone (or no
//! longer close a circle, or no longer point up) are a note, not a failure:
//! run `cargo xtask layers` to shrink the baseline.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::io::ErrorKind;
use std::path::Path;

type Result<T> = std::result::Result<T, String>;

/// gemm-host's sources, from the repository root.
const SRC: &str = "gemm-host/src";
/// The committed baseline, from the repository root.
const BASELINE: &str = "xtask/layers.txt";

/// The task: print the graph; rewrite the baseline, or (`check`) compare
/// against it.
pub fn layers(check: bool) -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("xtask: no repository root")?;
    let sources = read_sources(&root.join(SRC))?;
    let graph = Graph::build(&sources)?;
    let baseline_path = root.join(BASELINE);
    let old = match fs::read_to_string(&baseline_path) {
        Ok(text) => Some(Baseline::parse(&text).map_err(|e| format!("{BASELINE}: {e}"))?),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{BASELINE}: {e}")),
    };
    let layers = old.as_ref().map(|b| b.layers.clone()).unwrap_or_default();
    let analysis = Analysis::new(&graph, &layers);
    print!("{}", analysis.summary(&graph, &layers));
    if check {
        let Some(old) = old else {
            return Err(format!("layers: {BASELINE} is missing; run `cargo xtask layers` to write it"));
        };
        let verdict = analysis.check(&graph, &old);
        for note in &verdict.notes {
            println!("{note}");
        }
        if verdict.failures.is_empty() {
            println!("layers: no new import circle or upward import (baseline {BASELINE})");
            Ok(())
        } else {
            Err(verdict.failures.join("\n"))
        }
    } else {
        let text = analysis.baseline(&graph, &layers).write();
        fs::write(&baseline_path, text).map_err(|e| format!("{BASELINE}: {e}"))?;
        println!(
            "layers: wrote {BASELINE}: {} circle edges, {} upward imports",
            analysis.circle.len(),
            analysis.upward.len()
        );
        Ok(())
    }
}

/// Every `.rs` file under `dir`, by its path relative to it (`/`-separated).
fn read_sources(dir: &Path) -> Result<BTreeMap<String, String>> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) -> Result<()> {
        let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let rel = format!("{prefix}{name}");
            if path.is_dir() {
                walk(&path, &format!("{rel}/"), out)?;
            } else if name.ends_with(".rs") {
                let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                out.insert(rel, text);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out)?;
    Ok(out)
}

// ---------------------------------------------------------------------------
// Tokens: code without comments; strings kept only as literals.

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// A string literal's text as written (no escapes undone).
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Rust source to tokens: comments (doc comments too) dropped, string, char
/// and number literals kept as one token each (numbers and chars as a
/// `Punct('0')`), lifetimes as `'` and an identifier.
fn tokenize(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < n {
        let ch = c[i];
        let start_line = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if let Some((text, end)) = string_literal(&c, i) {
            line += text.matches('\n').count();
            out.push(Token { tok: Tok::Str(text), line: start_line });
            i = end;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let q = if ch == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                // An escaped char literal: to the closing quote.
                let mut j = q + 3;
                while j < n && c[j] != '\'' {
                    j += 1;
                }
                out.push(Token { tok: Tok::Punct('0'), line });
                i = j + 1;
            } else if at(q + 2) == '\'' {
                out.push(Token { tok: Tok::Punct('0'), line });
                i = q + 3;
            } else {
                // A lifetime or label: the identifier follows as its own token.
                out.push(Token { tok: Tok::Punct('\''), line });
                i = q + 1;
            }
        } else if ch == 'r' && at(i + 1) == '#' && is_ident_start(at(i + 2)) {
            let mut j = i + 2;
            while j < n && is_ident_char(c[j]) {
                j += 1;
            }
            out.push(Token { tok: Tok::Ident(c[i + 2..j].iter().collect()), line });
            i = j;
        } else if is_ident_start(ch) {
            let mut j = i;
            while j < n && is_ident_char(c[j]) {
                j += 1;
            }
            out.push(Token { tok: Tok::Ident(c[i..j].iter().collect()), line });
            i = j;
        } else if ch.is_ascii_digit() {
            while i < n && is_ident_char(c[i]) {
                i += 1;
            }
            out.push(Token { tok: Tok::Punct('0'), line });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token { tok: Tok::PathSep, line });
            i += 2;
        } else {
            out.push(Token { tok: Tok::Punct(ch), line });
            i += 1;
        }
    }
    out
}

/// A string literal starting at `i` (`"..."`, `b"..."`, `c"..."`, `r#"..."#`,
/// `br"..."`, ...): its text and the index after it.
fn string_literal(c: &[char], i: usize) -> Option<(String, usize)> {
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut j = i;
    if at(j) == 'b' || at(j) == 'c' {
        j += 1;
    }
    if at(j) == 'r' {
        j += 1;
        let mut hashes = 0;
        while at(j) == '#' {
            hashes += 1;
            j += 1;
        }
        if at(j) != '"' {
            return None;
        }
        let start = j + 1;
        let mut k = start;
        while k < c.len() {
            if c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#') {
                return Some((c[start..k].iter().collect(), k + 1 + hashes));
            }
            k += 1;
        }
        return Some((c[start..].iter().collect(), c.len()));
    }
    if at(j) != '"' {
        return None;
    }
    let start = j + 1;
    let mut k = start;
    while k < c.len() && c[k] != '"' {
        k += if c[k] == '\\' { 2 } else { 1 };
    }
    let end = k.min(c.len());
    Some((c[start..end].iter().collect(), end + 1))
}

// ---------------------------------------------------------------------------
// One file's structure: module declarations, `use` items, item names, paths.

/// How a path starts, which says where it is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RefKind {
    /// `crate::` (or `$crate::`): from the crate root.
    Crate,
    /// `super::` so many times.
    Super(usize),
    /// `self::`
    SelfRel,
    /// Any other `x::`: a file submodule when `x` is one.
    Bare,
}

/// A path in code: the segments after its `crate`/`super`/`self`.
#[derive(Clone, Debug)]
struct PathRef {
    kind: RefKind,
    path: Vec<String>,
    /// Inline modules (`mod x { .. }`) around it in its file.
    inline_depth: usize,
    line: usize,
}

#[derive(Clone, Debug)]
struct ModDecl {
    /// The inline modules around the declaration in its file.
    scope: Vec<String>,
    name: String,
    path_attr: Option<String>,
    inline: bool,
}

/// A leaf of a use tree or a path: `a::b::c`, `a::b as x`, `a::*`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Leaf {
    path: Vec<String>,
    alias: Option<String>,
    glob: bool,
}

#[derive(Clone, Debug)]
struct UseItem {
    scope: Vec<String>,
    leaf: Leaf,
}

#[derive(Debug, Default)]
struct Scan {
    /// `#![cfg(test)]`: the whole file is a test.
    test_only: bool,
    mods: Vec<ModDecl>,
    uses: Vec<UseItem>,
    /// Items the file defines at module level (fn, struct, ...), by scope.
    items: Vec<(Vec<String>, String)>,
    refs: Vec<PathRef>,
}

fn tok(t: &[Token], i: usize) -> Option<&Tok> {
    t.get(i).map(|x| &x.tok)
}

fn is_punct(t: &[Token], i: usize, c: char) -> bool {
    tok(t, i) == Some(&Tok::Punct(c))
}

fn is_ident(t: &[Token], i: usize, s: &str) -> bool {
    matches!(tok(t, i), Some(Tok::Ident(x)) if x == s)
}

/// The index of the bracket closing the one at `open` (any of `([{`), or the
/// last token.
fn matching(t: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, x) in t.iter().enumerate().skip(open) {
        match x.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    t.len().saturating_sub(1)
}

const ITEM_KEYWORDS: [&str; 8] = ["fn", "struct", "enum", "union", "trait", "const", "static", "type"];

/// The index after the item (or statement, field, arm) starting at `i`, for
/// skipping what `#[cfg(test)]` marks.
fn skip_item(t: &[Token], i: usize) -> usize {
    let item = matches!(tok(t, i), Some(Tok::Ident(k)) if k == "mod" || k == "impl" || k == "use" || k == "unsafe"
        || k == "extern" || k == "async" || ITEM_KEYWORDS.contains(&k.as_str()));
    let mut depth = 0usize;
    let mut j = i;
    while j < t.len() {
        match t[j].tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(c @ (')' | ']' | '}')) => {
                if depth == 0 {
                    return j;
                }
                depth -= 1;
                if depth == 0 && c == '}' {
                    return j + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return j + 1,
            Tok::Punct(',') if depth == 0 && !item => return j + 1,
            _ => {}
        }
        j += 1;
    }
    j
}

/// Parses a path or use tree from `i` onto `prefix`; pushes its leaves and
/// returns the index after it. A turbofish (`::<`) ends a path.
fn parse_tree(t: &[Token], mut i: usize, prefix: Vec<String>, out: &mut Vec<Leaf>) -> usize {
    match tok(t, i) {
        Some(Tok::Punct('{')) => {
            i += 1;
            loop {
                match tok(t, i) {
                    None => return i,
                    Some(Tok::Punct('}')) => return i + 1,
                    Some(Tok::Punct(',')) => i += 1,
                    Some(_) => {
                        let next = parse_tree(t, i, prefix.clone(), out);
                        i = if next > i { next } else { i + 1 };
                    }
                }
            }
        }
        Some(Tok::Punct('*')) => {
            out.push(Leaf { path: prefix, alias: None, glob: true });
            i + 1
        }
        Some(Tok::Ident(s)) => {
            let mut path = prefix;
            // `use a::{self, ..}` names `a`.
            if s != "self" || path.is_empty() {
                path.push(s.clone());
            }
            i += 1;
            if tok(t, i) == Some(&Tok::PathSep) && !is_punct(t, i + 1, '<') {
                return parse_tree(t, i + 1, path, out);
            }
            let mut alias = None;
            if is_ident(t, i, "as") {
                if let Some(Tok::Ident(a)) = tok(t, i + 1) {
                    alias = Some(a.clone());
                    i += 2;
                }
            }
            out.push(Leaf { path, alias, glob: false });
            i
        }
        _ => {
            if !prefix.is_empty() {
                out.push(Leaf { path: prefix, alias: None, glob: false });
            }
            i
        }
    }
}

/// A leaf as a reference: where its path starts.
fn classify(path: &[String], inline_depth: usize, line: usize) -> Option<PathRef> {
    let (kind, rest) = match path.first().map(String::as_str) {
        None => return None,
        Some("crate") => (RefKind::Crate, &path[1..]),
        Some("self") => (RefKind::SelfRel, &path[1..]),
        Some("super") => {
            let n = path.iter().take_while(|s| *s == "super").count();
            (RefKind::Super(n), &path[n..])
        }
        Some(_) => (RefKind::Bare, path),
    };
    Some(PathRef { kind, path: rest.to_vec(), inline_depth, line })
}

fn is_cfg_test(attr: &[Token]) -> bool {
    let toks: Vec<&Tok> = attr.iter().map(|x| &x.tok).collect();
    matches!(toks.as_slice(), [Tok::Ident(cfg), Tok::Punct('('), Tok::Ident(test), Tok::Punct(')')]
        if cfg == "cfg" && test == "test")
}

/// One file's structure and paths.
fn scan(src: &str) -> Scan {
    let t = tokenize(src);
    let mut s = Scan::default();
    // Open inline modules: name, brace depth inside.
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let (mut cfg_test, mut path_attr) = (false, None);
    let mut i = 0;
    while i < t.len() {
        // Attributes apply to the next item; their contents are not code.
        if is_punct(&t, i, '#') {
            let inner = is_punct(&t, i + 1, '!');
            let open = if inner { i + 2 } else { i + 1 };
            if is_punct(&t, open, '[') {
                let close = matching(&t, open);
                let attr = &t[open + 1..close];
                if is_cfg_test(attr) {
                    if inner && depth == 0 {
                        s.test_only = true;
                        return s;
                    }
                    cfg_test |= !inner;
                }
                if let [Token { tok: Tok::Ident(p), .. }, Token { tok: Tok::Punct('='), .. }, Token { tok: Tok::Str(file), .. }] =
                    attr
                {
                    if p == "path" {
                        path_attr = Some(file.clone());
                    }
                }
                i = close + 1;
                continue;
            }
        }
        if is_ident(&t, i, "pub") {
            i += 1;
            if is_punct(&t, i, '(') {
                i = matching(&t, i) + 1;
            }
            continue;
        }
        let test = std::mem::take(&mut cfg_test);
        let attr_path = path_attr.take();
        if test {
            i = skip_item(&t, i);
            continue;
        }
        let names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
        let item_level = depth == scope.last().map_or(0, |x| x.1);
        let path_start = tok(&t, i + 1) == Some(&Tok::PathSep) && (i == 0 || tok(&t, i - 1) != Some(&Tok::PathSep));
        match &t[i].tok {
            Tok::Ident(k) if k == "mod" => {
                if let Some(Tok::Ident(name)) = tok(&t, i + 1) {
                    let decl =
                        |inline| ModDecl { scope: names.clone(), name: name.clone(), path_attr: attr_path, inline };
                    if is_punct(&t, i + 2, ';') {
                        s.mods.push(decl(false));
                        i += 3;
                        continue;
                    }
                    if is_punct(&t, i + 2, '{') {
                        s.mods.push(decl(true));
                        depth += 1;
                        scope.push((name.clone(), depth));
                        i += 3;
                        continue;
                    }
                }
                i += 1;
            }
            Tok::Ident(k) if k == "use" => {
                let mut leaves = Vec::new();
                let next = parse_tree(&t, i + 1, Vec::new(), &mut leaves);
                for leaf in leaves {
                    s.refs.extend(classify(&leaf.path, scope.len(), t[i].line));
                    s.uses.push(UseItem { scope: names.clone(), leaf });
                }
                i = next.max(i + 1);
            }
            Tok::Ident(k) if item_level && ITEM_KEYWORDS.contains(&k.as_str()) => {
                if let Some(Tok::Ident(name)) = tok(&t, i + 1) {
                    s.items.push((names, name.clone()));
                }
                i += 1;
            }
            Tok::Ident(k) if k == "macro_rules" && is_punct(&t, i + 1, '!') => {
                if let Some(Tok::Ident(name)) = tok(&t, i + 2) {
                    s.items.push((names, name.clone()));
                }
                i += 1;
            }
            Tok::Ident(_) if path_start => {
                let mut leaves = Vec::new();
                let next = parse_tree(&t, i, Vec::new(), &mut leaves);
                for leaf in leaves {
                    s.refs.extend(classify(&leaf.path, scope.len(), t[i].line));
                }
                i = next.max(i + 1);
            }
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                while scope.last().is_some_and(|x| x.1 > depth) {
                    scope.pop();
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    s
}

// ---------------------------------------------------------------------------
// The module tree and the graph.

/// What a name in `lib.rs`'s namespaces is, other than a module.
#[derive(Clone, Debug)]
enum Entry {
    /// A `use`: the absolute path it names.
    Alias(Vec<String>),
    /// Another crate's item (`pub use gemm_core::..`).
    External,
    /// Defined in `lib.rs` itself.
    Item,
}

#[derive(Debug)]
struct Module {
    /// Names from the crate root.
    path: Vec<String>,
    parent: Option<usize>,
    /// The file (index into `Graph::nodes`); `None` for the root and `lib.rs`'s
    /// inline modules.
    file: Option<usize>,
    /// Declared modules: a file module's file submodules; any of the root's
    /// and its inline modules'.
    children: BTreeMap<String, usize>,
    /// `lib.rs`'s namespaces only: `use` items and items.
    entries: BTreeMap<String, Entry>,
    globs: Vec<Vec<String>>,
    /// A glob of another crate: unknown names may come from it.
    external_glob: bool,
}

impl Module {
    fn new(path: Vec<String>, parent: Option<usize>, file: Option<usize>) -> Module {
        Module {
            path,
            parent,
            file,
            children: BTreeMap::new(),
            entries: BTreeMap::new(),
            globs: Vec::new(),
            external_glob: false,
        }
    }
}

/// gemm-host's files and the imports between them.
#[derive(Debug)]
struct Graph {
    /// Module names (file paths under the source folder without `.rs`), sorted.
    nodes: Vec<String>,
    /// `from -> to` with where (file:line), sorted.
    edges: BTreeMap<(usize, usize), Vec<String>>,
}

/// The module tree while it is built.
struct Tree<'a> {
    sources: &'a BTreeMap<String, String>,
    modules: Vec<Module>,
    /// Per file module: its file (relative path) and scan.
    files: Vec<(usize, String, Scan)>,
}

/// The node name of a file: `batch.rs` -> `batch`, `plan/mod.rs` -> `plan`.
fn node_name(rel: &str) -> String {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    stem.strip_suffix("/mod").unwrap_or(stem).to_string()
}

impl Tree<'_> {
    /// The file a `mod name;` declared in `file` loads.
    fn locate(&self, file: &str, decl: &ModDecl) -> Result<String> {
        let (dir, name) = match file.rfind('/') {
            Some(k) => (&file[..=k], &file[k + 1..]),
            None => ("", file),
        };
        let mod_rs = matches!(name, "lib.rs" | "mod.rs" | "main.rs");
        let mut base = if mod_rs { dir.to_string() } else { format!("{dir}{}/", name.trim_end_matches(".rs")) };
        for inline in &decl.scope {
            base.push_str(inline);
            base.push('/');
        }
        let candidates = match &decl.path_attr {
            Some(p) if decl.scope.is_empty() => vec![format!("{dir}{p}")],
            Some(p) => vec![format!("{base}{p}")],
            None => vec![format!("{base}{}.rs", decl.name), format!("{base}{}/mod.rs", decl.name)],
        };
        candidates
            .iter()
            .find(|c| self.sources.contains_key(c.as_str()))
            .cloned()
            .ok_or_else(|| format!("{file}: `mod {}` has no file ({})", decl.name, candidates.join(" or ")))
    }

    /// Adds the file module `name` (file `rel`) under `parent`, and its file
    /// submodules.
    fn add_file(&mut self, rel: String, parent: usize, name: &str) -> Result<usize> {
        let scan = scan(&self.sources[&rel]);
        let mut path = self.modules[parent].path.clone();
        path.push(name.to_string());
        let id = self.modules.len();
        self.modules.push(Module::new(path, Some(parent), None));
        self.modules[parent].children.insert(name.to_string(), id);
        if scan.test_only {
            return Ok(id);
        }
        let decls: Vec<ModDecl> = scan.mods.iter().filter(|d| !d.inline && d.scope.is_empty()).cloned().collect();
        self.files.push((id, rel.clone(), scan));
        for decl in decls {
            let child = self.locate(&rel, &decl)?;
            self.add_file(child, id, &decl.name)?;
        }
        Ok(id)
    }

    /// The namespace of `lib.rs` at `scope` (inline modules from the root).
    fn namespace(&self, scope: &[String]) -> Option<usize> {
        let mut cur = 0;
        for name in scope {
            cur = *self.modules[cur].children.get(name)?;
        }
        Some(cur)
    }

    /// A `use` path in `lib.rs`'s namespace `ns` as an absolute path; `None`
    /// for another crate's.
    fn absolute(&self, ns: usize, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let m = &self.modules[ns];
        match first.as_str() {
            "crate" => Some(path[1..].to_vec()),
            "self" => Some([m.path.as_slice(), &path[1..]].concat()),
            "super" => {
                let n = path.iter().take_while(|s| *s == "super").count();
                let base = &m.path[..m.path.len().saturating_sub(n)];
                Some([base, &path[n..]].concat())
            }
            _ if m.children.contains_key(first) || m.entries.contains_key(first) => {
                Some([m.path.as_slice(), path].concat())
            }
            _ => None,
        }
    }

    /// The module an absolute path names an item of: a file module, or `None`
    /// for `lib.rs`'s own items and other crates'; `Err` when it names nothing.
    fn resolve(&self, path: &[String], hops: usize) -> std::result::Result<Option<usize>, ()> {
        if hops > 16 {
            return Err(());
        }
        let mut cur = 0;
        for (i, seg) in path.iter().enumerate() {
            let m = &self.modules[cur];
            if let Some(&child) = m.children.get(seg) {
                cur = child;
                continue;
            }
            if m.file.is_some() {
                return Ok(Some(cur));
            }
            match m.entries.get(seg) {
                Some(Entry::Alias(target)) => {
                    return self.resolve(&[target.as_slice(), &path[i + 1..]].concat(), hops + 1);
                }
                Some(Entry::External | Entry::Item) => return Ok(None),
                None => {
                    for glob in &m.globs {
                        if let Ok(Some(found)) = self.resolve(&[glob.as_slice(), &path[i..]].concat(), hops + 1) {
                            return Ok(Some(found));
                        }
                    }
                    return if m.external_glob { Ok(None) } else { Err(()) };
                }
            }
        }
        Ok(self.modules[cur].file.map(|_| cur))
    }

    /// A path from file module `m` down its own file submodules: the deepest
    /// one it names, `None` if none (the file itself).
    fn local(&self, m: usize, path: &[String]) -> Option<usize> {
        let mut cur = m;
        for seg in path {
            match self.modules[cur].children.get(seg) {
                Some(&child) if self.modules[child].file.is_some() => cur = child,
                _ => break,
            }
        }
        (cur != m).then_some(cur)
    }

    /// The module a path in file module `m` names an item of; `Err` with the
    /// path as written when it names nothing.
    fn target(&self, m: usize, r: &PathRef) -> std::result::Result<Option<usize>, String> {
        let written = |prefix: &str| format!("{prefix}{}", r.path.join("::"));
        match r.kind {
            RefKind::Crate => self.resolve(&r.path, 0).map_err(|()| written("crate::")),
            RefKind::Super(n) => {
                let up = "super::".repeat(n);
                if n < r.inline_depth {
                    return Ok(None);
                }
                if n == r.inline_depth {
                    return Ok(self.local(m, &r.path));
                }
                let mut ancestor = m;
                for _ in 0..n - r.inline_depth {
                    ancestor = self.modules[ancestor].parent.ok_or_else(|| written(&up))?;
                }
                let path = [self.modules[ancestor].path.as_slice(), &r.path].concat();
                self.resolve(&path, 0).map_err(|()| written(&up))
            }
            RefKind::SelfRel => Ok(if r.inline_depth == 0 { self.local(m, &r.path) } else { None }),
            RefKind::Bare => Ok(if r.inline_depth == 0 { self.local(m, &r.path) } else { None }),
        }
    }
}

impl Graph {
    /// The graph of the crate whose sources are `sources` (relative path ->
    /// text; `lib.rs` is the root), or the paths it cannot resolve.
    fn build(sources: &BTreeMap<String, String>) -> Result<Graph> {
        let lib = scan(sources.get("lib.rs").ok_or("layers: no lib.rs")?);
        let mut tree = Tree { sources, modules: vec![Module::new(Vec::new(), None, None)], files: Vec::new() };
        for decl in &lib.mods {
            let parent = tree.namespace(&decl.scope).ok_or_else(|| format!("lib.rs: mod {}: no scope", decl.name))?;
            if decl.inline {
                let path = [tree.modules[parent].path.as_slice(), std::slice::from_ref(&decl.name)].concat();
                let id = tree.modules.len();
                tree.modules.push(Module::new(path, Some(parent), None));
                tree.modules[parent].children.insert(decl.name.clone(), id);
            } else {
                let file = tree.locate("lib.rs", decl)?;
                tree.add_file(file, parent, &decl.name)?;
            }
        }
        for (scope, name) in &lib.items {
            if let Some(ns) = tree.namespace(scope) {
                tree.modules[ns].entries.insert(name.clone(), Entry::Item);
            }
        }
        for item in &lib.uses {
            let Some(ns) = tree.namespace(&item.scope) else { continue };
            let abs = tree.absolute(ns, &item.leaf.path);
            let m = &mut tree.modules[ns];
            match (item.leaf.glob, abs) {
                (true, Some(abs)) => m.globs.push(abs),
                (true, None) => m.external_glob = true,
                (false, abs) => {
                    let Some(name) = item.leaf.alias.clone().or_else(|| item.leaf.path.last().cloned()) else {
                        continue;
                    };
                    m.entries.insert(name, abs.map_or(Entry::External, Entry::Alias));
                }
            }
        }

        let mut names: Vec<String> = tree.files.iter().map(|(_, rel, _)| node_name(rel)).collect();
        names.sort();
        names.dedup();
        let index = |rel: &str| names.binary_search(&node_name(rel)).expect("a node per file");
        let files: Vec<(usize, String)> = tree.files.iter().map(|(id, rel, _)| (*id, rel.clone())).collect();
        for (id, rel) in &files {
            tree.modules[*id].file = Some(index(rel));
        }

        let mut edges: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
        let mut unresolved = Vec::new();
        for (id, rel, scan) in &tree.files {
            let from = index(rel);
            for r in &scan.refs {
                let place = format!("{SRC}/{rel}:{}", r.line);
                match tree.target(*id, r) {
                    Ok(Some(to)) => {
                        let to = tree.modules[to].file.expect("a file module");
                        if to != from {
                            edges.entry((from, to)).or_default().push(place);
                        }
                    }
                    Ok(None) => {}
                    Err(path) => unresolved.push(format!("  {place}: {path}")),
                }
            }
        }
        if !unresolved.is_empty() {
            return Err(format!(
                "layers: paths that name nothing in gemm-host's module tree (a missed import could hide a \
                 circle; if the path is valid, teach xtask/src/layers.rs to resolve it):\n{}",
                unresolved.join("\n")
            ));
        }
        for places in edges.values_mut() {
            places.dedup();
        }
        Ok(Graph { nodes: names, edges })
    }

    fn adjacency(&self) -> Vec<Vec<usize>> {
        let mut adj = vec![Vec::new(); self.nodes.len()];
        for &(a, b) in self.edges.keys() {
            adj[a].push(b);
        }
        adj
    }

    fn edge_name(&self, (a, b): (usize, usize)) -> (String, String) {
        (self.nodes[a].clone(), self.nodes[b].clone())
    }

    /// Where an edge is, the first few places.
    fn places(&self, edge: (usize, usize)) -> String {
        let places = &self.edges[&edge];
        let mut s = places.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        if places.len() > 3 {
            s.push_str(&format!(", +{} more", places.len() - 3));
        }
        s
    }
}

// ---------------------------------------------------------------------------
// Circles and layers.

/// Tarjan's strongly connected components of the graph on `0..adj.len()`,
/// each sorted, in the order Tarjan finishes them (callees first).
fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        let adj = s.adj;
        for &w in &adj[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if s.index[v] == Some(s.low[v]) {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().expect("v is on the stack");
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort_unstable();
            s.out.push(component);
        }
    }
    let n = adj.len();
    let mut s = State {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The layers, lowest first: `name: module module folder/`.
#[derive(Clone, Debug, Default)]
struct Layers {
    names: Vec<String>,
    /// A module (or folder, ending in `/`) and its layer's rank.
    members: Vec<(String, usize)>,
    /// The section as written, kept when the baseline is rewritten.
    raw: Vec<String>,
}

impl Layers {
    fn rank(&self, module: &str) -> Option<usize> {
        if let Some((_, rank)) = self.members.iter().find(|(m, _)| m == module) {
            return Some(*rank);
        }
        self.members
            .iter()
            .filter_map(|(m, rank)| {
                let folder = m.strip_suffix('/')?;
                (module == folder || module.starts_with(m.as_str())).then_some((m.len(), *rank))
            })
            .max()
            .map(|(_, rank)| rank)
    }
}

/// The committed debt: the layers, the circle edges and the upward imports
/// allowed today.
#[derive(Clone, Debug, Default)]
struct Baseline {
    layers: Layers,
    circles: BTreeSet<(String, String)>,
    upward: BTreeSet<(String, String)>,
}

const HEADER: &str = "\
# gemm-host's import debt, written by `cargo xtask layers` (xtask/src/layers.rs)
# from gemm-host/src. `cargo xtask layers --check` (in .ci/run) fails on an
# import that closes an import circle or points up the layers and is not
# listed here.
#
# This is the debt to pay down. The goal is empty [circles] and [upward] lists:
# gemm-host flows one way (operands -> describe -> plan -> exec -> device), no
# module imports from a higher layer and no modules import each other in a
# circle. When an import goes, run `cargo xtask layers` to shrink this file;
# do not add lines by hand to let a new one in.
#
# Modules are files under gemm-host/src without `.rs` (x/mod.rs is x); one
# import a line, `from -> to`. [layers] is written by hand and kept as it is:
# the layers lowest first, one a line, `name: module module folder/ ...`; a
# module may import its own layer and those listed before it.
";

impl Baseline {
    fn parse(text: &str) -> Result<Baseline> {
        let mut b = Baseline::default();
        let mut section = "circles";
        for (number, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = match name {
                    "layers" | "circles" | "upward" => name,
                    _ => return Err(format!("line {}: unknown section [{name}]", number + 1)),
                };
                continue;
            }
            if section == "layers" {
                b.layers.raw.push(raw.to_string());
            }
            if line.is_empty() {
                continue;
            }
            if section == "layers" {
                let (name, members) =
                    line.split_once(':').ok_or_else(|| format!("line {}: not `layer: modules`", number + 1))?;
                let rank = b.layers.names.len();
                b.layers.names.push(name.trim().to_string());
                for m in members.split_whitespace() {
                    if b.layers.members.iter().any(|(x, _)| x == m) {
                        return Err(format!("line {}: {m} is in two layers", number + 1));
                    }
                    b.layers.members.push((m.to_string(), rank));
                }
                continue;
            }
            let (from, to) = line.split_once("->").ok_or_else(|| format!("line {}: not `from -> to`", number + 1))?;
            let edge = (from.trim().to_string(), to.trim().to_string());
            if section == "upward" { &mut b.upward } else { &mut b.circles }.insert(edge);
        }
        while b.layers.raw.last().is_some_and(|l| l.trim().is_empty()) {
            b.layers.raw.pop();
        }
        Ok(b)
    }

    fn write(&self) -> String {
        let mut s = format!("{HEADER}\n[layers]\n");
        for line in &self.layers.raw {
            s.push_str(line);
            s.push('\n');
        }
        let edges = |s: &mut String, set: &BTreeSet<(String, String)>| {
            for (from, to) in set {
                s.push_str(&format!("{from} -> {to}\n"));
            }
        };
        s.push_str("\n[circles]\n# Imports inside an import circle (modules of one strongly connected component).\n");
        edges(&mut s, &self.circles);
        s.push_str("\n[upward]\n# Imports from a module to one of a higher layer.\n");
        edges(&mut s, &self.upward);
        s
    }
}

/// The graph's circles and upward imports.
struct Analysis {
    /// Components of more than one module, sorted.
    circles: Vec<Vec<usize>>,
    /// Per node, its circle (index into `circles`).
    circle_of: Vec<Option<usize>>,
    /// Edges inside a circle.
    circle: BTreeSet<(usize, usize)>,
    /// Edges to a higher layer.
    upward: BTreeSet<(usize, usize)>,
    ranks: Vec<Option<usize>>,
}

/// What `--check` says: failures (exit 1) and notes.
struct Verdict {
    failures: Vec<String>,
    notes: Vec<String>,
}

impl Analysis {
    fn new(graph: &Graph, layers: &Layers) -> Analysis {
        let mut circles: Vec<Vec<usize>> = tarjan(&graph.adjacency()).into_iter().filter(|c| c.len() > 1).collect();
        circles.sort();
        let mut circle_of = vec![None; graph.nodes.len()];
        for (k, c) in circles.iter().enumerate() {
            for &v in c {
                circle_of[v] = Some(k);
            }
        }
        let circle = graph
            .edges
            .keys()
            .copied()
            .filter(|&(a, b)| circle_of[a].is_some() && circle_of[a] == circle_of[b])
            .collect();
        let ranks: Vec<Option<usize>> = graph.nodes.iter().map(|n| layers.rank(n)).collect();
        let upward = graph
            .edges
            .keys()
            .copied()
            .filter(|&(a, b)| matches!((ranks[a], ranks[b]), (Some(x), Some(y)) if x < y))
            .collect();
        Analysis { circles, circle_of, circle, upward, ranks }
    }

    /// The circle an edge inside one closes: `a -> b -> ... -> a`, by a
    /// shortest way back from `b` to `a` inside the component.
    fn cycle(&self, graph: &Graph, (a, b): (usize, usize)) -> String {
        let adj = graph.adjacency();
        let component = self.circle_of[a];
        let mut before: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([b]);
        let mut seen = BTreeSet::from([b]);
        while let Some(v) = queue.pop_front() {
            if v == a {
                break;
            }
            for &w in &adj[v] {
                if self.circle_of[w] == component && seen.insert(w) {
                    before.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        let mut way = vec![a];
        let mut v = a;
        while v != b {
            match before.get(&v) {
                Some(&u) => v = u,
                None => break,
            }
            way.push(v);
        }
        way.push(a);
        way.reverse();
        way.iter().map(|&v| graph.nodes[v].as_str()).collect::<Vec<_>>().join(" -> ")
    }

    fn summary(&self, graph: &Graph, layers: &Layers) -> String {
        let mut s = format!(
            "gemm-host: {} modules under {SRC} (lib.rs, the root, only re-exports), {} imports between them\n",
            graph.nodes.len(),
            graph.edges.len()
        );
        if self.circles.is_empty() {
            s.push_str("no import circle\n");
        } else {
            s.push_str("import circles (strongly connected components, Tarjan):\n");
        }
        for (k, c) in self.circles.iter().enumerate() {
            let edges = self.circle.iter().filter(|&&(a, _)| self.circle_of[a] == Some(k)).count();
            let names: Vec<&str> = c.iter().map(|&v| graph.nodes[v].as_str()).collect();
            s.push_str(&format!("  {} modules, {edges} imports: {}\n", c.len(), names.join(", ")));
        }
        let in_circles: usize = self.circles.iter().map(Vec::len).sum();
        s.push_str(&format!(
            "{in_circles} of {} modules are in an import circle; {} imports close one (the goal: none)\n",
            graph.nodes.len(),
            self.circle.len()
        ));
        if !layers.names.is_empty() {
            s.push_str("layers, lowest first:\n");
            for (rank, name) in layers.names.iter().enumerate() {
                let members: Vec<&str> = (0..graph.nodes.len())
                    .filter(|&v| self.ranks[v] == Some(rank))
                    .map(|v| graph.nodes[v].as_str())
                    .collect();
                let members = if members.is_empty() { "(none yet)".to_string() } else { members.join(", ") };
                s.push_str(&format!("  {rank} {name}: {members}\n"));
            }
            let unplaced: Vec<&str> =
                (0..graph.nodes.len()).filter(|&v| self.ranks[v].is_none()).map(|v| graph.nodes[v].as_str()).collect();
            if !unplaced.is_empty() {
                s.push_str(&format!("  in no layer (not checked for upward imports): {}\n", unplaced.join(", ")));
            }
            s.push_str(&format!("{} upward imports (the goal: none)\n", self.upward.len()));
        }
        s
    }

    /// The baseline that allows exactly today's circle edges and upward
    /// imports.
    fn baseline(&self, graph: &Graph, layers: &Layers) -> Baseline {
        Baseline {
            layers: layers.clone(),
            circles: self.circle.iter().map(|&e| graph.edge_name(e)).collect(),
            upward: self.upward.iter().map(|&e| graph.edge_name(e)).collect(),
        }
    }

    fn check(&self, graph: &Graph, baseline: &Baseline) -> Verdict {
        let mut failures = Vec::new();
        let mut notes = Vec::new();
        let new_circle: Vec<(usize, usize)> =
            self.circle.iter().copied().filter(|&e| !baseline.circles.contains(&graph.edge_name(e))).collect();
        if !new_circle.is_empty() {
            failures.push(format!("layers: new import circle: imports inside a circle that {BASELINE} does not list:"));
            for &e in &new_circle {
                let (a, b) = graph.edge_name(e);
                failures.push(format!("  {a} -> {b} ({}) closes {}", graph.places(e), self.cycle(graph, e)));
            }
        }
        let new_upward: Vec<(usize, usize)> =
            self.upward.iter().copied().filter(|&e| !baseline.upward.contains(&graph.edge_name(e))).collect();
        if !new_upward.is_empty() {
            failures
                .push(format!("layers: new upward import: imports from a lower layer that {BASELINE} does not list:"));
            for &e in &new_upward {
                let (a, b) = graph.edge_name(e);
                let layer = |v: usize| self.ranks[v].map_or("?", |r| baseline.layers.names[r].as_str());
                failures.push(format!(
                    "  {a} -> {b} ({}): layer {} imports layer {}",
                    graph.places(e),
                    layer(e.0),
                    layer(e.1)
                ));
            }
        }
        if !failures.is_empty() {
            failures.push(
                "cut the import (move the item down, or pass it in from above); the baseline only lists \
                 today's debt"
                    .to_string(),
            );
        }
        let now_circle: BTreeSet<(String, String)> = self.circle.iter().map(|&e| graph.edge_name(e)).collect();
        let now_upward: BTreeSet<(String, String)> = self.upward.iter().map(|&e| graph.edge_name(e)).collect();
        let paid_circle: Vec<String> =
            baseline.circles.difference(&now_circle).map(|(a, b)| format!("{a} -> {b}")).collect();
        let paid_upward: Vec<String> =
            baseline.upward.difference(&now_upward).map(|(a, b)| format!("{a} -> {b}")).collect();
        if !paid_circle.is_empty() || !paid_upward.is_empty() {
            notes.push("layers: note: debt paid, run `cargo xtask layers` to shrink the baseline:".to_string());
            if !paid_circle.is_empty() {
                notes.push(format!("  gone, or no longer in a circle: {}", paid_circle.join(", ")));
            }
            if !paid_upward.is_empty() {
                notes.push(format!("  gone, or no longer upward: {}", paid_upward.join(", ")));
            }
        }
        Verdict { failures, notes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
    }

    fn edges(graph: &Graph) -> Vec<String> {
        graph.edges.keys().map(|&e| graph.edge_name(e)).map(|(a, b)| format!("{a} -> {b}")).collect()
    }

    /// The first segment of every `crate::` path in `src`.
    fn crate_roots(src: &str) -> Vec<String> {
        scan(src).refs.into_iter().filter(|r| r.kind == RefKind::Crate).map(|r| r.path[0].clone()).collect()
    }

    #[test]
    fn comments_doc_links_and_strings_are_not_code() {
        let src = r##"
//! Module docs: [`crate::aa`] and crate::bb::X.
/// A doc link: [`Thing`](crate::cc::Thing), and crate::dd.
/* block /* nested crate::ee */ crate::ff */
#[doc = "crate::gg"]
fn f() -> &'static str {
    let _c = 'c';
    let _q = '\'';
    let _s = "crate::hh::x \" crate::ii";
    let _r = r#"crate::jj "quoted""#;
    crate::real::go();
    "crate::kk"
}
"##;
        assert_eq!(crate_roots(src), ["real"]);
    }

    #[test]
    fn use_trees_count_each_module() {
        let src = "use crate::{a, b::c};\nuse crate::d::{self, e as f};\nuse crate::g::*;\nfn h() { crate::i::J::<u8>::new(); $crate::k::m!(); }\n";
        assert_eq!(crate_roots(src), ["a", "b", "d", "d", "g", "i", "k"]);
        let mut leaves = Vec::new();
        parse_tree(&tokenize("{a, b::c as d, e::*}"), 0, vec!["crate".into()], &mut leaves);
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            leaves,
            [
                Leaf { path: path(&["crate", "a"]), alias: None, glob: false },
                Leaf { path: path(&["crate", "b", "c"]), alias: Some("d".into()), glob: false },
                Leaf { path: path(&["crate", "e"]), alias: None, glob: true },
            ]
        );
    }

    #[test]
    fn cfg_test_items_are_skipped() {
        let src = "use crate::a::A;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n    fn t() { crate::c::C; }\n}\n\
                   #[cfg(test)]\nuse crate::d::D;\nfn after() { crate::e::E; }\n#[cfg(any(test, feature = \"x\"))]\nfn f() { crate::g::G; }\n";
        assert_eq!(crate_roots(src), ["a", "e", "g"]);
        assert!(scan("#![cfg(test)]\nuse crate::a;\n").refs.is_empty());
    }

    #[test]
    fn tarjan_finds_the_strongly_connected_components() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone, 6 -> 6 (a self-loop).
        let adj = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![], vec![6]];
        let mut sccs = tarjan(&adj);
        sccs.sort();
        assert_eq!(sccs, vec![vec![0, 1, 2], vec![3, 4], vec![5], vec![6]]);
        // Callees finish first.
        assert_eq!(tarjan(&[vec![1], vec![]]), vec![vec![1], vec![0]]);
    }

    /// A crate like gemm-host: `#[path]` modules, an alias, root and
    /// `tuning` re-exports, a glob, a file submodule using `super::`.
    fn crate_sources() -> BTreeMap<String, String> {
        sources(&[
            (
                "lib.rs",
                "//! [`crate::plan`]\nmod device;\nmod matrix;\nmod plan;\n#[path = \"registry.rs\"]\nmod registry_list;\n\
                 pub use matrix::Matrix;\npub use gemm_core::Layout;\npub(crate) use registry_list as registry;\n\
                 pub mod tuning {\n    pub use crate::plan::Plan;\n    pub mod registry {\n        pub use crate::registry_list::*;\n    }\n}\n",
            ),
            ("device.rs", "use crate::registry;\nuse crate::Layout;\npub struct Device;\n"),
            ("matrix.rs", "use crate::device::Device;\n/// [`crate::plan::Plan`]\npub struct Matrix;\n"),
            ("plan.rs", "#[path = \"table.rs\"]\nmod table;\nuse crate::Matrix;\npub struct Plan;\nfn t() { table::T; }\n"),
            ("table.rs", "use super::Plan;\npub static T: u8 = 0;\n"),
            ("registry.rs", "pub fn entry() { crate::tuning::registry::entry(); }\n"),
        ])
    }

    #[test]
    fn graph_follows_lib_re_exports_aliases_and_submodules() {
        let graph = Graph::build(&crate_sources()).unwrap();
        assert_eq!(graph.nodes, ["device", "matrix", "plan", "registry", "table"]);
        assert_eq!(
            edges(&graph),
            ["device -> registry", "matrix -> device", "plan -> matrix", "plan -> table", "table -> plan"]
        );
        assert_eq!(graph.edges[&(2, 1)], ["gemm-host/src/plan.rs:3"]);

        let mut src = crate_sources();
        src.insert("device.rs".into(), "fn f() { crate::tuning::Plan; }\n".into());
        assert_eq!(edges(&Graph::build(&src).unwrap())[0], "device -> plan");

        src.insert("device.rs".into(), "fn f() { crate::nothing::X; }\n".into());
        let e = Graph::build(&src).unwrap_err();
        assert!(e.contains("gemm-host/src/device.rs:1: crate::nothing::X"), "{e}");
    }

    #[test]
    fn check_fails_on_a_new_circle_and_notes_paid_debt() {
        let src = crate_sources();
        let graph = Graph::build(&src).unwrap();
        let analysis = Analysis::new(&graph, &Layers::default());
        assert_eq!(analysis.circles, [vec![2, 4]]);
        let baseline = Baseline::parse(&analysis.baseline(&graph, &Layers::default()).write()).unwrap();
        assert_eq!(baseline.circles.len(), 2);
        let verdict = analysis.check(&graph, &baseline);
        assert!(verdict.failures.is_empty() && verdict.notes.is_empty());

        // device -> matrix closes device -> matrix -> device.
        let mut grown = src.clone();
        grown.insert("device.rs".into(), "use crate::registry;\nfn f() { crate::Matrix; }\n".into());
        let graph2 = Graph::build(&grown).unwrap();
        let analysis2 = Analysis::new(&graph2, &Layers::default());
        let verdict = analysis2.check(&graph2, &baseline);
        let text = verdict.failures.join("\n");
        assert!(
            text.contains("device -> matrix (gemm-host/src/device.rs:2) closes device -> matrix -> device"),
            "{text}"
        );
        assert!(
            text.contains("matrix -> device (gemm-host/src/matrix.rs:1) closes matrix -> device -> matrix"),
            "{text}"
        );
        assert!(!text.contains("plan -> table"), "{text}");

        // The table no longer imports the plan: a note, not a failure.
        let mut shrunk = src.clone();
        shrunk.insert("table.rs".into(), "pub static T: u8 = 0;\n".into());
        let graph3 = Graph::build(&shrunk).unwrap();
        let verdict = Analysis::new(&graph3, &Layers::default()).check(&graph3, &baseline);
        assert!(verdict.failures.is_empty());
        assert!(verdict.notes.join("\n").contains("gone, or no longer in a circle: plan -> table, table -> plan"));
    }

    #[test]
    fn upward_imports_against_the_layers() {
        let text = "# comment\n[layers]\n# lowest first\nbase: registry\ndevice: device\nops: matrix plan/\n\n[circles]\n[upward]\n";
        let baseline = Baseline::parse(text).unwrap();
        assert_eq!(baseline.layers.rank("plan"), Some(2));
        assert_eq!(baseline.layers.rank("plan/ladder"), Some(2));
        assert_eq!(baseline.layers.rank("table"), None);
        let graph = Graph::build(&crate_sources()).unwrap();
        let analysis = Analysis::new(&graph, &baseline.layers);
        assert!(analysis.upward.is_empty());

        let mut src = crate_sources();
        src.insert("registry.rs".into(), "use crate::device::Device;\n".into());
        let graph = Graph::build(&src).unwrap();
        let analysis = Analysis::new(&graph, &baseline.layers);
        let verdict = analysis.check(&graph, &baseline);
        let failures = verdict.failures.join("\n");
        assert!(failures.contains("registry -> device (gemm-host/src/registry.rs:1): layer base imports layer device"));
        // Rewriting keeps the layers as written and lists the debt.
        let written = analysis.baseline(&graph, &baseline.layers).write();
        assert!(written.contains("[layers]\n# lowest first\nbase: registry\ndevice: device\nops: matrix plan/\n\n"));
        let again = Baseline::parse(&written).unwrap();
        assert_eq!(again.write(), written);
        assert!(again.upward.contains(&("registry".to_string(), "device".to_string())));
        assert!(again.circles.contains(&("device".to_string(), "registry".to_string())));
        assert!(analysis.check(&graph, &again).failures.is_empty());
    }
}
