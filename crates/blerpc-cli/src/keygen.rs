//! `blerpc keygen`: a new identity seed in a file (mode 0600), its public key on stdout.

use std::path::PathBuf;

use anyhow::Context as _;
use blerpc::known_keys::{KnownKeysFile, to_hex};
use clap::Args;

use crate::identity;

/// `blerpc keygen` options.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the seed (64 hex digits). Default: identity.key next to the default
    /// known-keys file ($XDG_CONFIG_HOME/blerpc/).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite an existing file (its identity is lost: centrals that pinned it will refuse the
    /// new one).
    #[arg(long)]
    pub force: bool,
}

/// The default seed location: `identity.key` beside the default known-keys file.
pub fn default_path() -> PathBuf {
    KnownKeysFile::default_path().with_file_name("identity.key")
}

/// Runs `blerpc keygen`: prints the public key (64 hex digits) on stdout.
pub fn run(args: &KeygenArgs) -> anyhow::Result<()> {
    let path = args.out.clone().unwrap_or_else(default_path);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create directory {}", dir.display()))?;
    }
    let seed = identity::generate();
    let public = identity::public_key(&seed)?;
    identity::store(&path, &seed, args.force)?;
    eprintln!(
        "blerpc: identity seed written to {} (mode 0600); serve with `blerpc serve --identity {}`; centrals pin this public key:",
        path.display(),
        path.display()
    );
    println!("{}", to_hex(&public));
    Ok(())
}
