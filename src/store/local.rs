//! The directory backend: each object a file under a root directory.
//!
//! A create-only write goes to a temporary file first (fsynced) and is then linked to its
//! name with `link(2)`, which fails when the name exists: the object appears whole, and two
//! writers of one key cannot both win. Temporary files start with `.` and are never listed.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::backend::{Listed, Objects, Put};
use super::error::{StoreError, StoreResult};
use super::key::Key;

/// Objects as files under `root` (made when first written).
pub struct DirObjects {
    root: PathBuf,
}

impl DirObjects {
    /// The store under `root`.
    pub fn new(root: impl Into<PathBuf>) -> DirObjects {
        DirObjects { root: root.into() }
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.root.join(key.as_str())
    }

    fn io(&self, op: &'static str, path: &Path, source: std::io::Error) -> StoreError {
        StoreError::Io {
            store: self.url(),
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

impl Objects for DirObjects {
    fn put_new(&self, key: &Key, data: &[u8]) -> StoreResult<Put> {
        let dst = self.path(key);
        let dir = dst.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| self.io("create directory", dir, e))?;
        let tmp = dir.join(format!(".{}.{}.tmp", key.file_name(), ulid::Ulid::new()));
        let written = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(data)?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(self.io("write object", &tmp, e));
        }
        let linked = fs::hard_link(&tmp, &dst);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(Put::Created),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Put::Exists),
            Err(e) => Err(self.io("place object", &dst, e)),
        }
    }

    fn get(&self, key: &Key) -> StoreResult<Option<Vec<u8>>> {
        let p = self.path(key);
        match fs::read(&p) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("read object", &p, e)),
        }
    }

    fn list(&self, prefix: &Key) -> StoreResult<Vec<Listed>> {
        let mut out = Vec::new();
        let mut todo = vec![(self.path(prefix), prefix.clone())];
        while let Some((dir, key)) = todo.pop() {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(self.io("list objects", &dir, e)),
            };
            for entry in rd {
                let entry = entry.map_err(|e| self.io("list objects", &dir, e))?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue; // no key names it
                };
                if name.starts_with('.') {
                    continue; // a write in progress
                }
                let Ok(child) = key.join(&name) else { continue };
                let meta = entry
                    .metadata()
                    .map_err(|e| self.io("inspect object", &entry.path(), e))?;
                if meta.is_dir() {
                    todo.push((entry.path(), child));
                } else {
                    out.push(Listed {
                        key: child,
                        size: meta.len(),
                        modified: meta.modified().unwrap_or(std::time::UNIX_EPOCH),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &Key) -> StoreResult<()> {
        let p = self.path(key);
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io("delete object", &p, e)),
        }
    }

    fn url(&self) -> String {
        self.root.display().to_string()
    }
}
