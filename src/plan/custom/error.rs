//! [`RegistryError`]: what can go wrong registering, loading or looking up a custom
//! strategy. Its own file, below both the registry and the shared-library loader
//! ([`native`](super::native)) that raise it.

use std::path::PathBuf;

/// What can go wrong registering or looking up a custom strategy.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The module is outside every allowed prefix (by default none is allowed).
    #[error("module {} is not allowed: {}", module.display(), allowed_text(allowed))]
    NotAllowed {
        /// The module asked for.
        module: PathBuf,
        /// The allowed prefixes.
        allowed: Vec<PathBuf>,
    },
    /// The strategy lacks operations of the protocol.
    #[error("strategy {strategy:?} does not implement the protocol: missing {}", missing.join(", "))]
    ProtocolMismatch {
        /// The strategy's name.
        strategy: String,
        /// The operations it lacks, in protocol order.
        missing: Vec<String>,
    },
    /// The module could not be loaded, or lacks the class's symbol.
    #[error("cannot load strategy from {}: {reason}", module.display())]
    Load {
        /// The module.
        module: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// No strategy is registered under the name.
    #[error("no custom strategy {name:?} is registered (registered: [{}])", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names.
        known: Vec<String>,
    },
    /// The name is taken (by a built-in strategy or an earlier registration), or unusable.
    #[error("cannot register strategy {name:?}: {reason}")]
    Duplicate {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
}

fn allowed_text(allowed: &[PathBuf]) -> String {
    if allowed.is_empty() {
        "no module prefix is allowed (StrategyRegistry::allow_module_prefix)".to_string()
    } else {
        let v: Vec<String> = allowed.iter().map(|p| p.display().to_string()).collect();
        format!(
            "it is under none of the allowed prefixes [{}]",
            v.join(", ")
        )
    }
}
