//! `blerpc keygen`: a new identity seed in a file (mode 0600), its public key on stdout.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use blerpc::identity::{self, SeedFileError, default_path};
use blerpc::known_keys::to_hex;
use clap::Args;

/// `blerpc keygen` options.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the seed (64 hex digits); its directory must exist. Default: identity.key
    /// next to the default known-keys file ($XDG_CONFIG_HOME/blerpc/, created if needed), which
    /// `blerpc serve` uses when no --identity is given.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite an existing file (its identity is lost: centrals that pinned it will refuse the
    /// new one).
    #[arg(long)]
    pub force: bool,
}

/// Runs `blerpc keygen`: prints the public key (64 hex digits) on stdout.
pub fn run(args: &KeygenArgs) -> anyhow::Result<()> {
    let path = args.out.clone().unwrap_or_else(default_path);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if args.out.is_none() {
            // The default location's directory is ours to create.
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create directory {}", dir.display()))?;
        } else if !dir.is_dir() {
            bail!(
                "directory {} does not exist: create it first, or leave out --out to write {}",
                dir.display(),
                default_path().display()
            );
        }
    }
    let seed = identity::generate();
    let public = identity::public_key(&seed)?;
    identity::store(&path, &seed, args.force).map_err(seed_file_error)?;
    let serve = if args.out.is_none() {
        "`blerpc serve` uses it by default".to_string()
    } else {
        format!("serve with `blerpc serve --identity {}`", path.display())
    };
    eprintln!(
        "blerpc: identity seed written to {} (mode 0600; keep it secret); {serve}; centrals pin \
         this public key:",
        path.display()
    );
    println!("{}", to_hex(&public));
    Ok(())
}

/// A seed file's error, with what to do about it.
pub fn seed_file_error(e: SeedFileError) -> anyhow::Error {
    match e {
        SeedFileError::Exists { path } => anyhow!(
            "{} already exists; pass --force to overwrite it (the old identity is lost)",
            path.display()
        ),
        e @ SeedFileError::NotASeed { .. } => {
            anyhow!("{e} (create one with `blerpc keygen --out FILE`)")
        }
        e => e.into(),
    }
}

/// Reads a seed file, warning on stderr when other users may read or replace it.
pub fn load_seed_file(path: &Path) -> anyhow::Result<[u8; 32]> {
    let loaded = identity::load(path).map_err(seed_file_error)?;
    if let Some(shared) = &loaded.shared {
        eprintln!("blerpc: warning: {shared}");
    }
    Ok(loaded.seed)
}
