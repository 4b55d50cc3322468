//! A run directory as text and back: a gzipped tar in base64 between two marker lines, which
//! survives any channel that carries lines (a pod's log, a terminal's copy and paste).

use std::io::{self, BufRead, Write};
use std::path::Path;

use base64::Engine;

/// The line before the archive.
pub const BEGIN: &str = "-----BEGIN LOADLAB RUN DIRECTORY (tar.gz, base64)-----";
/// The line after it.
pub const END: &str = "-----END LOADLAB RUN DIRECTORY-----";
/// Characters of base64 per line.
const LINE: usize = 76;

/// An archive cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The text holds no complete archive between the markers.
    #[error("no complete run directory archive in the text (its marker lines are missing or cut)")]
    Missing,
    /// The base64 is damaged.
    #[error("the archive's base64 is damaged: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The tar or its gzip is damaged, or a file cannot be written.
    #[error("the archive cannot be unpacked: {0}")]
    Io(#[from] io::Error),
}

/// Writes the files of `dir` (and its folders') as an archive, marker lines included.
pub fn write_archive(dir: &Path, out: &mut impl Write) -> io::Result<()> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    tar.append_dir_all(".", dir)?;
    let bytes = tar.into_inner()?.finish()?;
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    writeln!(out, "{BEGIN}")?;
    for chunk in text.as_bytes().chunks(LINE) {
        out.write_all(chunk)?;
        out.write_all(b"\n")?;
    }
    writeln!(out, "{END}")
}

/// Unpacks the first archive in `text` into `dir` (made if missing); returns how many files it
/// held. Entries that would land outside `dir` are refused by the unpacking.
pub fn extract_archive(text: impl BufRead, dir: &Path) -> Result<usize, ArchiveError> {
    let mut inside = false;
    let mut encoded = String::new();
    let mut complete = false;
    for line in text.lines() {
        let line = line?;
        // A log line may carry a prefix (a timestamp): the markers are found within it.
        if !inside {
            inside = line.contains(BEGIN);
        } else if line.contains(END) {
            complete = true;
            break;
        } else {
            encoded.push_str(line.trim());
        }
    }
    if !complete {
        return Err(ArchiveError::Missing);
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded)?;
    std::fs::create_dir_all(dir)?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    let mut files = 0;
    for entry in tar.entries()? {
        let mut entry = entry?;
        let is_file = entry.header().entry_type().is_file();
        if entry.unpack_in(dir)? && is_file {
            files += 1;
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_goes_through_a_log_and_comes_back_whole() {
        let from = tempfile::tempdir().unwrap();
        std::fs::write(from.path().join("summary.json"), "{\"a\": 1}\n").unwrap();
        std::fs::create_dir(from.path().join("profile")).unwrap();
        let big: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(from.path().join("profile/data.bin"), &big).unwrap();
        let mut log = b"merge: 4 shard(s)\n".to_vec();
        write_archive(from.path(), &mut log).unwrap();
        log.extend_from_slice(b"done\n");
        let text = String::from_utf8(log).unwrap();
        assert!(text
            .lines()
            .all(|l| l.len() <= LINE || l.starts_with("-----")));
        let to = tempfile::tempdir().unwrap();
        let files = extract_archive(text.as_bytes(), to.path()).unwrap();
        assert_eq!(files, 2);
        assert_eq!(
            std::fs::read_to_string(to.path().join("summary.json")).unwrap(),
            "{\"a\": 1}\n"
        );
        assert_eq!(
            std::fs::read(to.path().join("profile/data.bin")).unwrap(),
            big
        );
        // A log cut before the end marker holds no archive.
        let cut = &text[..text.find(END).unwrap()];
        assert!(matches!(
            extract_archive(cut.as_bytes(), to.path()),
            Err(ArchiveError::Missing)
        ));
    }
}
