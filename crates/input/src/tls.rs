//! HTTPS settings as users give them (`--cacert` and `--insecure`, a scenario's `config.tls`)
//! as the plan's [`TlsSettings`]: the CA file is read and checked here, before anything runs.

use std::io;
use std::path::{Path, PathBuf};

use loadlab_run::{CaCert, TlsSettings};

/// A CA file (`--cacert`, a scenario's `config.tls.cacert`) that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    /// The file cannot be read.
    #[error("cannot read the CA file {path}: {error}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        error: io::Error,
    },
    /// The file holds no PEM certificate.
    #[error("the CA file {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NotPem {
        /// The file.
        path: PathBuf,
    },
}

/// The TLS settings of `--cacert` and `--insecure` (or a scenario's `config.tls`): the CA
/// file is read here, so a missing or empty one is refused before anything runs.
pub fn settings(cacert: Option<&Path>, insecure: bool) -> Result<TlsSettings, CaFileError> {
    let cacert = match cacert {
        None => None,
        Some(path) => {
            let pem = std::fs::read(path).map_err(|error| CaFileError::Unreadable {
                path: path.to_path_buf(),
                error,
            })?;
            if !pem
                .windows(CERTIFICATE_PEM.len())
                .any(|w| w == CERTIFICATE_PEM)
            {
                return Err(CaFileError::NotPem {
                    path: path.to_path_buf(),
                });
            }
            Some(CaCert {
                path: path.display().to_string(),
                pem,
            })
        }
    };
    Ok(TlsSettings { cacert, insecure })
}

/// The line that opens a certificate in a PEM file.
const CERTIFICATE_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----";
