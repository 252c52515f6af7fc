//! The S3 backend: objects in a bucket of any S3-compatible store, through the
//! `object_store` crate.
//!
//! Endpoint, region and credentials come from the standard AWS variables
//! (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`; `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint such as a local
//! test server), as every AWS tool reads them. Create-only writes are `PUT`s with
//! `If-None-Match: *`, which the server answers with 412 when the key exists.
//!
//! The client is async; this backend keeps a private current-thread tokio runtime and blocks
//! on it, so nothing async leaks into the library's API. Requests are retried a few times
//! within a bounded time (a store that is down is reported in seconds, not minutes).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjPath;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, RetryConfig,
};

use super::backend::{Listed, Objects, Put};
use super::error::{StoreError, StoreResult};
use super::key::Key;

/// How long one request may take before it is abandoned.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many requests [`S3Objects::put_new_all`] keeps in flight.
const IN_FLIGHT: usize = 8;
/// How long a request is retried in all.
const RETRY_TIME: Duration = Duration::from_secs(15);

/// A bucket (and a key prefix in it) of an S3-compatible store.
pub struct S3Objects {
    store: Arc<AmazonS3>,
    prefix: String,
    url: String,
    /// The runtime the client's futures run on; one thread at a time blocks on it.
    rt: tokio::runtime::Runtime,
}

impl S3Objects {
    /// The store for `bucket` under `prefix` (no leading or trailing `/`), configured from the
    /// environment. Nothing is sent until the first operation.
    pub fn from_env(bucket: &str, prefix: &str) -> StoreResult<S3Objects> {
        S3Objects::from_env_with(bucket, prefix, &[])
    }

    /// [`S3Objects::from_env`], with `settings` taking precedence over the environment:
    /// pairs of an `object_store` S3 configuration key (`aws_endpoint`, `aws_region`,
    /// `aws_access_key_id`, `aws_secret_access_key`, …; `aws_allow_http` too) and its value.
    /// For a process that talks to several stores, or whose environment is not its to set.
    pub fn from_env_with(
        bucket: &str,
        prefix: &str,
        settings: &[(&str, &str)],
    ) -> StoreResult<S3Objects> {
        let url = if prefix.is_empty() {
            format!("s3://{bucket}")
        } else {
            format!("s3://{bucket}/{prefix}")
        };
        let setup = |reason: String| StoreError::Url {
            url: url.clone(),
            reason,
        };
        // reqwest is built without a bundled crypto provider: rustls' ring one is installed
        // here, so the build needs no C build of aws-lc (nor bindgen). Its lack of
        // post-quantum key exchange is why rustls marks it deprecated. Installing twice is
        // harmless.
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let allow_http = settings
            .iter()
            .find(|(k, _)| matches!(*k, "aws_allow_http" | "allow_http"))
            .map(|(_, v)| v.to_string())
            .or_else(|| std::env::var("AWS_ALLOW_HTTP").ok())
            .is_some_and(|v| v == "true" || v == "1");
        let client = ClientOptions::new()
            .with_allow_http(allow_http)
            .with_timeout(REQUEST_TIMEOUT)
            .with_connect_timeout(CONNECT_TIMEOUT);
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 4,
            retry_timeout: RETRY_TIME,
        };
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_client_options(client)
            .with_retry(retry);
        if std::env::var_os("AWS_REGION").is_none()
            && std::env::var_os("AWS_DEFAULT_REGION").is_none()
        {
            builder = builder.with_region("us-east-1");
        }
        for (k, v) in settings {
            if matches!(*k, "aws_allow_http" | "allow_http") {
                continue; // applied to the client options above
            }
            let key: object_store::aws::AmazonS3ConfigKey =
                k.parse().map_err(|e| setup(format!("setting {k}: {e}")))?;
            builder = builder.with_config(key, *v);
        }
        let store = builder.build().map_err(|e| setup(e.to_string()))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| setup(format!("cannot start the client's runtime: {e}")))?;
        Ok(S3Objects {
            store: Arc::new(store),
            prefix: prefix.to_string(),
            url,
            rt,
        })
    }

    /// Runs one request to completion on the private runtime. Called from inside another
    /// tokio runtime (an async caller), it runs on a thread of its own, since a runtime cannot
    /// block inside another.
    fn block<T: Send>(&self, f: impl std::future::Future<Output = T> + Send) -> T {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.rt.block_on(f);
        }
        std::thread::scope(|s| {
            match s.spawn(|| self.rt.block_on(f)).join() {
                Ok(v) => v,
                // The request itself panicked: pass the panic on, as the direct call would.
                Err(p) => std::panic::resume_unwind(p),
            }
        })
    }

    /// A create-only `PUT` (`If-None-Match: *`) of `data` under `key`.
    async fn create(&self, key: &Key, data: &[u8]) -> StoreResult<Put> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let payload = bytes::Bytes::copy_from_slice(data).into();
        match self
            .store
            .put_opts(&self.location(key), payload, opts)
            .await
        {
            Ok(_) => Ok(Put::Created),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(Put::Exists),
            Err(e) => Err(self.remote("put", key, e)),
        }
    }

    fn location(&self, key: &Key) -> ObjPath {
        if self.prefix.is_empty() {
            ObjPath::from(key.as_str())
        } else {
            ObjPath::from(format!("{}/{}", self.prefix, key.as_str()))
        }
    }

    fn remote(&self, op: &'static str, key: &Key, e: object_store::Error) -> StoreError {
        StoreError::Remote {
            store: self.url.clone(),
            op,
            key: key.to_string(),
            source: Box::new(e),
        }
    }
}

impl Objects for S3Objects {
    fn put_new(&self, key: &Key, data: &[u8]) -> StoreResult<Put> {
        self.block(self.create(key, data))
    }

    fn put_new_all(&self, items: &[(Key, Vec<u8>)]) -> StoreResult<Vec<Put>> {
        use futures_util::StreamExt;
        let puts = items.iter().map(|(key, data)| self.create(key, data));
        self.block(
            futures_util::stream::iter(puts)
                .buffered(IN_FLIGHT)
                .try_collect(),
        )
    }

    fn get(&self, key: &Key) -> StoreResult<Option<Vec<u8>>> {
        let loc = self.location(key);
        let got = self.block(async {
            let r = self.store.get(&loc).await?;
            r.bytes().await
        });
        match got {
            Ok(b) => Ok(Some(b.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.remote("get", key, e)),
        }
    }

    fn list(&self, prefix: &Key) -> StoreResult<Vec<Listed>> {
        let loc = self.location(prefix);
        let metas: Vec<object_store::ObjectMeta> = self
            .block(self.store.list(Some(&loc)).try_collect())
            .map_err(|e| self.remote("list", prefix, e))?;
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let mut out: Vec<Listed> = metas
            .into_iter()
            .filter_map(|m| {
                let key = Key::new(m.location.as_ref().strip_prefix(&strip)?).ok()?;
                Some(Listed {
                    key,
                    size: m.size,
                    modified: SystemTime::from(m.last_modified),
                })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &Key) -> StoreResult<()> {
        let loc = self.location(key);
        match self.block(self.store.delete(&loc)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.remote("delete", key, e)),
        }
    }

    fn url(&self) -> String {
        self.url.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An async caller (inside its own tokio runtime) gets an error from a store that is
    /// down, not a panic about nested runtimes.
    #[test]
    fn a_caller_inside_a_runtime_gets_an_answer() {
        let objects = S3Objects::from_env_with(
            "fleet",
            "x",
            &[
                ("aws_endpoint", "http://127.0.0.1:9"),
                ("aws_allow_http", "true"),
                ("aws_access_key_id", "k"),
                ("aws_secret_access_key", "s"),
            ],
        )
        .unwrap();
        let key = Key::new("a").unwrap();
        let outer = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let got = outer.block_on(async { objects.get(&key) });
        let err = got.expect_err("nothing listens on port 9");
        assert!(err.is_unreachable(), "{err}");
        assert!(err.to_string().contains("s3://fleet/x"), "{err}");
    }
}
