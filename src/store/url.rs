//! Store URLs: which backend, and where in it.
//!
//! `s3://bucket/prefix` names an S3-compatible object store (endpoint, region and
//! credentials come from the standard AWS variables); a plain path or `file:///path` names a
//! directory holding the same layout of objects (a shared mount, or a test). Nothing is
//! reached when a URL is parsed.

use std::fmt;
use std::path::PathBuf;

use super::error::{StoreError, StoreResult};

/// A parsed store URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// Objects as files under a directory.
    Dir(PathBuf),
    /// Objects in an S3 bucket, under a key prefix (empty: the bucket's root).
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix, without leading or trailing `/`.
        prefix: String,
    },
}

impl StoreUrl {
    /// Parses `s3://bucket[/prefix]`, `file:///abs/path` or a path.
    pub fn parse(url: &str) -> StoreResult<StoreUrl> {
        let bad = |reason: &str| StoreError::Url {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let valid_bucket = (3..=63).contains(&bucket.len())
                && bucket
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b));
            if !valid_bucket {
                return Err(bad(
                    "the bucket must be 3 to 63 lowercase letters, digits, '-' or '.'",
                ));
            }
            let prefix = prefix.trim_matches('/').to_string();
            if !prefix.is_empty() {
                super::key::Key::new(prefix.clone()).map_err(|e| bad(&e.to_string()))?;
            }
            return Ok(StoreUrl::S3 {
                bucket: bucket.to_string(),
                prefix,
            });
        }
        if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(bad("a file URL needs an absolute path (file:///…)"));
            }
            return Ok(StoreUrl::Dir(PathBuf::from(path)));
        }
        if url.contains("://") {
            return Err(bad("unknown scheme: use s3://bucket/prefix or a path"));
        }
        if url.is_empty() {
            return Err(bad("empty"));
        }
        Ok(StoreUrl::Dir(PathBuf::from(url)))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Dir(p) => write!(f, "{}", p.display()),
            StoreUrl::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            StoreUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

impl std::str::FromStr for StoreUrl {
    type Err = StoreError;
    fn from_str(s: &str) -> StoreResult<StoreUrl> {
        StoreUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_backend() {
        assert_eq!(
            StoreUrl::parse("s3://team-bucket/agents/pending/").unwrap(),
            StoreUrl::S3 {
                bucket: "team-bucket".into(),
                prefix: "agents/pending".into()
            }
        );
        assert_eq!(
            StoreUrl::parse("s3://b12").unwrap().to_string(),
            "s3://b12".to_string()
        );
        assert_eq!(
            StoreUrl::parse("file:///srv/store").unwrap(),
            StoreUrl::Dir("/srv/store".into())
        );
        assert_eq!(
            StoreUrl::parse("rel/dir").unwrap(),
            StoreUrl::Dir("rel/dir".into())
        );
        for bad in [
            "s3://",
            "s3://UP",
            "s3://b/../x",
            "gs://b/p",
            "file://rel",
            "",
        ] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
