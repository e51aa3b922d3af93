//! How the plugin engine sees a package's files: the [`PackageFiles`] trait, which the edge
//! implements for a directory on disk and for a built archive, plus an in-memory implementation
//! ([`MemFiles`], also used for archives and tests), path normalisation and glob matching.
//! Pure: nothing here opens a file; implementations of the trait do.

use std::collections::BTreeMap;

/// One entry of a package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Package-relative, `/`-separated, no leading `./`, no trailing `/`.
    pub path: String,
    pub is_dir: bool,
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilesError {
    #[error("{0}: no such file in the package")]
    NotFound(String),
    #[error("{path}: cannot read: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{0}: the path leaves the package (absolute or with ..)")]
    Escapes(String),
}

/// Read access to a package's files.
pub trait PackageFiles {
    /// Every file and directory, sorted by path. Directories that hold files are listed too.
    fn entries(&self) -> Vec<Entry>;
    /// The bytes of a file (package-relative path as in [`Entry::path`]).
    fn read(&self, path: &str) -> Result<Vec<u8>, FilesError>;

    fn is_dir(&self, path: &str) -> bool {
        let Ok(path) = normalize(path) else {
            return false;
        };
        if path.is_empty() {
            return true;
        }
        let prefix = format!("{path}/");
        self.entries()
            .iter()
            .any(|e| (e.is_dir && e.path == path) || e.path.starts_with(&prefix))
    }

    fn is_file(&self, path: &str) -> bool {
        let Ok(path) = normalize(path) else {
            return false;
        };
        self.entries().iter().any(|e| !e.is_dir && e.path == path)
    }

    /// Files matching a glob, sorted by path.
    fn glob(&self, pattern: &str) -> Result<Vec<String>, FilesError> {
        let pattern = normalize(pattern)?;
        Ok(self
            .entries()
            .into_iter()
            .filter(|e| !e.is_dir && glob_match(&pattern, &e.path))
            .map(|e| e.path)
            .collect())
    }
}

/// Normalise a package-relative path: `./a//b/` → `a/b`. Absolute paths and `..` are refused.
pub fn normalize(path: &str) -> Result<String, FilesError> {
    if path.starts_with('/') {
        return Err(FilesError::Escapes(path.to_string()));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(FilesError::Escapes(path.to_string())),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// Whether a pattern has glob characters.
pub fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// Match a `/`-separated path against a glob: `*` and `?` stay inside one segment, `[...]` is
/// a character class (`[!...]` negated), `**` as a whole segment matches any number of segments.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').collect();
    let segs: Vec<&str> = path.split('/').collect();
    match_segments(&pat, &segs)
}

fn match_segments(pat: &[&str], segs: &[&str]) -> bool {
    match pat.split_first() {
        None => segs.is_empty(),
        Some((&"**", rest)) => (0..=segs.len()).any(|skip| match_segments(rest, &segs[skip..])),
        Some((first, rest)) => match segs.split_first() {
            Some((seg, tail)) => {
                match_segment(
                    &first.chars().collect::<Vec<_>>(),
                    &seg.chars().collect::<Vec<_>>(),
                ) && match_segments(rest, tail)
            }
            None => false,
        },
    }
}

fn match_segment(p: &[char], s: &[char]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some(('*', rest)) => (0..=s.len()).any(|skip| match_segment(rest, &s[skip..])),
        Some(('?', rest)) => !s.is_empty() && match_segment(rest, &s[1..]),
        Some(('[', rest)) => {
            let Some(close) = rest.iter().skip(1).position(|c| *c == ']').map(|i| i + 1) else {
                return s.first() == Some(&'[') && match_segment(rest, &s[1..]);
            };
            let Some(c) = s.first() else {
                return false;
            };
            let (negated, class) = match rest[..close].split_first() {
                Some(('!', class)) => (true, class),
                _ => (false, &rest[..close]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == '-' {
                    hit |= class[i] <= *c && *c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == *c;
                    i += 1;
                }
            }
            hit != negated && match_segment(&rest[close + 1..], &s[1..])
        }
        Some((c, rest)) => s.first() == Some(c) && match_segment(rest, &s[1..]),
    }
}

/// A package held in memory: an unpacked archive, the bundled releases, or a test fixture.
#[derive(Debug, Clone, Default)]
pub struct MemFiles {
    files: BTreeMap<String, Vec<u8>>,
    dirs: std::collections::BTreeSet<String>,
}

impl MemFiles {
    pub fn new() -> MemFiles {
        MemFiles::default()
    }

    /// Add a file (its parent directories are implied).
    pub fn add(&mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Result<(), FilesError> {
        let path = normalize(path)?;
        self.add_parents(&path);
        self.files.insert(path, bytes.into());
        Ok(())
    }

    /// Add a directory, possibly empty.
    pub fn add_dir(&mut self, path: &str) -> Result<(), FilesError> {
        let path = normalize(path)?;
        if !path.is_empty() {
            self.add_parents(&path);
            self.dirs.insert(path);
        }
        Ok(())
    }

    fn add_parents(&mut self, path: &str) {
        let mut at = path;
        while let Some((parent, _)) = at.rsplit_once('/') {
            self.dirs.insert(parent.to_string());
            at = parent;
        }
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Files and their bytes, sorted by path.
    pub fn files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().map(|(p, b)| (p.as_str(), b.as_slice()))
    }

    /// Directories, sorted by path.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        self.dirs.iter().map(String::as_str)
    }

    /// Strip a common top-level directory (`name-1.0.0/metadata.yaml` → `metadata.yaml`) when
    /// every entry lives under one and the root itself holds no metadata file.
    pub fn strip_single_root(self) -> MemFiles {
        let has_root_meta = self
            .files
            .keys()
            .any(|p| !p.contains('/') && p.starts_with("metadata."));
        if has_root_meta {
            return self;
        }
        let roots: std::collections::BTreeSet<&str> = self
            .files
            .keys()
            .map(|p| p.split('/').next().unwrap_or(""))
            .collect();
        let [root] = roots.into_iter().collect::<Vec<_>>()[..] else {
            return self;
        };
        let prefix = format!("{root}/");
        let mut out = MemFiles::new();
        for (path, bytes) in &self.files {
            if let Some(rest) = path.strip_prefix(&prefix) {
                // Paths were normalised when added, so this cannot fail.
                let _ = out.add(rest, bytes.clone());
            }
        }
        for dir in &self.dirs {
            if let Some(rest) = dir.strip_prefix(&prefix) {
                let _ = out.add_dir(rest);
            }
        }
        out
    }
}

impl PackageFiles for MemFiles {
    fn entries(&self) -> Vec<Entry> {
        let mut out: Vec<Entry> = self
            .files
            .keys()
            .map(|p| Entry {
                path: p.clone(),
                is_dir: false,
            })
            .chain(self.dirs.iter().map(|p| Entry {
                path: p.clone(),
                is_dir: true,
            }))
            .collect();
        out.sort();
        out
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, FilesError> {
        let path = normalize(path)?;
        self.files
            .get(&path)
            .cloned()
            .ok_or(FilesError::NotFound(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("graphs/*.yaml", "graphs/a.yaml"));
        assert!(!glob_match("graphs/*.yaml", "graphs/sub/a.yaml"));
        assert!(glob_match("graphs/**/*.yaml", "graphs/sub/a.yaml"));
        assert!(glob_match("graphs/**/*.yaml", "graphs/a.yaml"));
        assert!(glob_match("a/t?sks.y[a-z]ml", "a/tasks.yaml"));
        assert!(!glob_match("a/[!t]*", "a/tasks"));
    }

    #[test]
    fn memfiles() {
        let mut m = MemFiles::new();
        m.add("p-1.0.0/metadata.yaml", "x").unwrap();
        m.add("p-1.0.0/graphs/b.yaml", "b").unwrap();
        m.add("p-1.0.0/graphs/a.yaml", "a").unwrap();
        m.add_dir("p-1.0.0/repositories/ubuntu").unwrap();
        let m = m.strip_single_root();
        assert!(m.is_dir("graphs") && m.is_dir("repositories/ubuntu/") && m.is_dir("./"));
        assert!(m.is_file("./metadata.yaml"));
        assert_eq!(
            m.glob("graphs/*.yaml").unwrap(),
            ["graphs/a.yaml", "graphs/b.yaml"]
        );
        assert!(m.read("../etc/passwd").is_err());
    }
}
