//! A [`SystemTime`] stored as whole milliseconds since the Unix epoch (serde `with`), the
//! format of every time in the library's JSON records: plan records, snapshot infos and
//! custom-strategy messages. One reader and writer, so they all read each other's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serializer};

/// Writes `t` as milliseconds since the epoch (a time before it as 0).
pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    s.serialize_u64(ms)
}

/// Reads milliseconds since the epoch.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
    let ms = u64::deserialize(d)?;
    Ok(UNIX_EPOCH + Duration::from_millis(ms))
}

/// `t` truncated to whole milliseconds: a time that reads back equal to itself once stored.
pub fn whole(t: SystemTime) -> SystemTime {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    UNIX_EPOCH + Duration::from_millis(ms)
}
