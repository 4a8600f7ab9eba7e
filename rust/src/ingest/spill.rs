//! Records of three `u64`s spilled to temporary files, in buckets read back
//! one at a time: what a pass over a file larger than memory must remember
//! of every line (ids, positions) waits on disk, and a bucket at a time is
//! sorted in memory.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) type Record = [u64; 3];

const RECORD: usize = 24;
/// Each bucket's write buffer.
const BUFFER: usize = 32 << 10;

/// One temporary file, removed as soon as it is made (its handle keeps it
/// readable on Unix; elsewhere it is removed when dropped).
struct Bucket {
    out: Option<BufWriter<File>>,
    path: std::path::PathBuf,
    len: u64,
}

impl Bucket {
    fn new() -> std::io::Result<Bucket> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "ctxcompact-spill-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Unix: gone from the folder now, whatever happens to this process.
        let _ = std::fs::remove_file(&path);
        Ok(Bucket {
            out: Some(BufWriter::with_capacity(BUFFER, file)),
            path,
            len: 0,
        })
    }

    fn push(&mut self, record: Record) -> std::io::Result<()> {
        let out = self.out.as_mut().ok_or_else(read_once)?;
        for v in record {
            out.write_all(&v.to_le_bytes())?;
        }
        self.len += 1;
        Ok(())
    }

    /// Every record pushed, in push order; the bucket is empty after.
    fn take(&mut self) -> std::io::Result<Vec<Record>> {
        let Some(out) = self.out.take() else {
            return Err(read_once());
        };
        let mut file = out.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        let mut reader = BufReader::with_capacity(BUFFER, file);
        let mut records = Vec::with_capacity(self.len as usize);
        let mut buf = [0u8; RECORD];
        for _ in 0..self.len {
            reader.read_exact(&mut buf)?;
            let word = |k: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&buf[8 * k..8 * k + 8]);
                u64::from_le_bytes(w)
            };
            records.push([word(0), word(1), word(2)]);
        }
        Ok(records)
    }
}

fn read_once() -> std::io::Error {
    std::io::Error::other("a spill bucket is read once")
}

impl Drop for Bucket {
    fn drop(&mut self) {
        if !cfg!(unix) {
            self.out = None;
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Records in `n` buckets; the caller says which bucket each goes to.
pub(super) struct Spill {
    buckets: Vec<Bucket>,
}

impl Spill {
    pub(super) fn new(n: usize) -> std::io::Result<Spill> {
        let buckets = (0..n.max(1))
            .map(|_| Bucket::new())
            .collect::<std::io::Result<_>>()?;
        Ok(Spill { buckets })
    }

    pub(super) fn len(&self) -> usize {
        self.buckets.len()
    }

    pub(super) fn push(&mut self, bucket: usize, record: Record) -> std::io::Result<()> {
        let last = self.buckets.len() - 1;
        self.buckets[bucket.min(last)].push(record)
    }

    /// Bucket `k`'s records in push order (once; empty after).
    pub(super) fn take(&mut self, k: usize) -> std::io::Result<Vec<Record>> {
        self.buckets[k].take()
    }
}

/// The bucket of `key` among `n`, uniform for hashes.
pub(super) fn by_hash(key: u64, n: usize) -> usize {
    ((u128::from(key) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_bucket_by_bucket_in_push_order() {
        let mut spill = Spill::new(3).unwrap();
        for k in 0..1000u64 {
            spill
                .push((k % 3) as usize, [k, k * 2, u64::MAX - k])
                .unwrap();
        }
        spill.push(7, [1, 2, 3]).unwrap(); // past the last: the last
        for b in 0..3u64 {
            let got = spill.take(b as usize).unwrap();
            let mut want: Vec<Record> = (0..1000u64)
                .filter(|k| k % 3 == b)
                .map(|k| [k, k * 2, u64::MAX - k])
                .collect();
            if b == 2 {
                want.push([1, 2, 3]);
            }
            assert_eq!(got, want);
            assert!(spill.take(b as usize).is_err());
        }
        assert_eq!(by_hash(0, 8), 0);
        assert_eq!(by_hash(u64::MAX, 8), 7);
    }
}
