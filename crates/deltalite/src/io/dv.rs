//! Deletion vectors: reading a file's deleted row positions (inline `i`, table-relative
//! `u` and absolute `p` storage) and writing new `deletion_vector_<uuid>.bin` files.
//!
//! The byte layout is the Delta protocol's "Deletion Vector Format": a file starts with a
//! version byte (1); each vector in it is a big-endian size (magic + bitmap), the
//! little-endian magic 1681511377, a portable 64-bit RoaringTreemap, and a big-endian
//! CRC-32 of magic and bitmap. Inline vectors are the magic and bitmap, z85-encoded.
//! Writing reuses the kernel's `StreamingDeletionVectorWriter` (vectors written together
//! share one file);
//! reading is done here, asynchronously, through the table's object store.

use std::sync::Arc;

use arrow::array::BooleanArray;
use delta_kernel::actions::deletion_vector_writer::{
    KernelDeletionVector, StreamingDeletionVectorWriter,
};
use deltalake::kernel::{Add, DeletionVectorDescriptor, StorageType};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use roaring::RoaringTreemap;
use url::Url;

use crate::error::{DeltaLiteError, Result};
use crate::table::files::TargetFile;

/// The magic of the portable RoaringBitmapArray serialization.
const MAGIC: u32 = 1_681_511_377;
/// Length of a z85-encoded UUID: the tail of a `u` descriptor's path.
const ENCODED_UUID_LEN: usize = 20;

/// The deleted rows of one file, for reads that know each row's position in it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Deleted(RoaringTreemap);

impl Deleted {
    /// The rows deleted from `file`, `None` when it has no deletion vector.
    pub(crate) async fn of(
        store: &Arc<dyn ObjectStore>,
        table_url: &Url,
        file: &TargetFile,
    ) -> Result<Option<Self>> {
        match &file.deletion_vector {
            Some(dv) => Ok(Some(Self(read(store, table_url, dv).await?))),
            None => Ok(None),
        }
    }

    pub(crate) fn contains(&self, position: u64) -> bool {
        self.0.contains(position)
    }

    pub(crate) fn len(&self) -> u64 {
        self.0.len()
    }

    /// The deleted rows of the slice of `rows` rows starting at `start`, as ascending
    /// offsets into the slice.
    pub(crate) fn within(&self, start: u64, rows: usize) -> Vec<u32> {
        let end = start + rows as u64;
        if self.0.range_cardinality(start..end) == 0 {
            return Vec::new();
        }
        let mut iter = self.0.iter();
        iter.advance_to(start);
        iter.take_while(|&p| p < end)
            .map(|p| (p - start) as u32)
            .collect()
    }

    /// A filter keeping the live rows of the slice of `rows` rows starting at `start`;
    /// `None` when none of them is deleted.
    pub(crate) fn keep(&self, start: u64, rows: usize) -> Option<BooleanArray> {
        let deleted = self.within(start, rows);
        if deleted.is_empty() {
            return None;
        }
        let mut keep = vec![true; rows];
        for row in deleted {
            keep[row as usize] = false;
        }
        Some(BooleanArray::from(keep))
    }

    /// These rows and `more`.
    pub(crate) fn with(mut self, more: impl IntoIterator<Item = u64>) -> Self {
        self.0.extend(more);
        self
    }

    pub(crate) fn treemap(&self) -> &RoaringTreemap {
        &self.0
    }
}

/// The row positions `dv` deletes from its data file, ascending: what every engine read
/// of a stored file skips, and what the server's scans of such files skip. `store` is
/// rooted at the table (`table_url`), as every data file path is; a vector stored at an
/// absolute path resolves under the table too.
pub async fn deleted_positions(
    store: &Arc<dyn ObjectStore>,
    table_url: &Url,
    dv: &DeletionVectorDescriptor,
) -> Result<Vec<u64>> {
    Ok(read(store, table_url, dv).await?.iter().collect())
}

/// The deleted row positions of a file, as its descriptor says. `store` is rooted at the
/// table (`table_url`), as every data file path is.
pub(crate) async fn read(
    store: &Arc<dyn ObjectStore>,
    table_url: &Url,
    dv: &DeletionVectorDescriptor,
) -> Result<RoaringTreemap> {
    let treemap = match dv.storage_type {
        StorageType::Inline => {
            let bytes = z85::decode(&dv.path_or_inline_dv)
                .map_err(|e| corrupt(dv, &format!("inline vector is not z85: {e}")))?;
            bitmap(dv, &bytes)?
        }
        StorageType::UuidRelativePath | StorageType::AbsolutePath => {
            let path = file_path(table_url, dv)?;
            let offset = usize::try_from(dv.offset.unwrap_or(1))
                .map_err(|_| corrupt(dv, "negative offset"))?;
            let size =
                usize::try_from(dv.size_in_bytes).map_err(|_| corrupt(dv, "negative size"))?;
            // Size prefix, then magic and bitmap (`size`), then the checksum.
            let range = offset as u64..(offset + 4 + size + 4) as u64;
            let bytes = store.get_range(&path, range).await?;
            let stored_size = u32::from_be_bytes(word(&bytes, 0)?) as usize;
            if stored_size != size {
                return Err(corrupt(
                    dv,
                    &format!("the file says {stored_size} bytes, the log {size}"),
                ));
            }
            let body = &bytes[4..4 + size];
            let checksum = u32::from_be_bytes(word(&bytes, 4 + size)?);
            if crc32(body) != checksum {
                return Err(corrupt(dv, "checksum mismatch"));
            }
            bitmap(dv, body)?
        }
    };
    if treemap.len() != dv.cardinality as u64 {
        return Err(corrupt(
            dv,
            &format!(
                "{} positions, the log says {}",
                treemap.len(),
                dv.cardinality
            ),
        ));
    }
    Ok(treemap)
}

/// Write `vectors` into one new deletion vector file at the table root and return their
/// descriptors, in order (`u` storage, no prefix, each at its own offset). One file per
/// call, not per vector: a call that marks every file of a table costs one PUT, and a
/// reader fetches each vector by range anyway. Nothing is written for no vectors.
pub(crate) async fn write<'a>(
    store: &Arc<dyn ObjectStore>,
    vectors: impl IntoIterator<Item = &'a RoaringTreemap>,
) -> Result<Vec<DeletionVectorDescriptor>> {
    let encoding = |e| DeltaLiteError::Other(format!("encoding a deletion vector: {e}"));
    let uuid = uuid::Uuid::new_v4();
    let name = z85::encode(uuid.as_bytes());
    let mut bytes = Vec::new();
    let mut writer = StreamingDeletionVectorWriter::new(&mut bytes);
    let mut descriptors = Vec::new();
    for deleted in vectors {
        let mut vector = KernelDeletionVector::new();
        vector.add_deleted_row_indexes(deleted.iter());
        let written = writer.write_deletion_vector(vector).map_err(encoding)?;
        descriptors.push(DeletionVectorDescriptor {
            storage_type: StorageType::UuidRelativePath,
            path_or_inline_dv: name.clone(),
            offset: Some(written.offset),
            size_in_bytes: written.size_in_bytes,
            cardinality: written.cardinality,
        });
    }
    writer.finalize().map_err(encoding)?;
    if !descriptors.is_empty() {
        let path = Path::from(format!("deletion_vector_{uuid}.bin"));
        store.put(&path, bytes.into()).await?;
    }
    Ok(descriptors)
}

/// The Adds that put each of `files` back with its new vector, the vectors all written
/// into one file by [`write`].
pub(crate) async fn write_for<'a>(
    store: &Arc<dyn ObjectStore>,
    files: impl IntoIterator<Item = (&'a TargetFile, &'a Deleted)>,
) -> Result<Vec<Add>> {
    let files: Vec<_> = files.into_iter().collect();
    let descriptors = write(store, files.iter().map(|(_, deleted)| deleted.treemap())).await?;
    Ok(files
        .iter()
        .zip(descriptors)
        .map(|((file, _), dv)| file.add_with(dv))
        .collect())
}

/// The vector file of a `u` descriptor, the only kind this engine writes (`None` for the
/// others).
pub(crate) fn own_file(dv: &DeletionVectorDescriptor) -> Option<Path> {
    (dv.storage_type == StorageType::UuidRelativePath)
        .then(|| relative_file(dv).ok())
        .flatten()
}

/// Where a stored vector lives, relative to the table root.
pub(crate) fn file_path(table_url: &Url, dv: &DeletionVectorDescriptor) -> Result<Path> {
    match dv.storage_type {
        StorageType::Inline => Err(corrupt(dv, "an inline vector has no file")),
        StorageType::UuidRelativePath => relative_file(dv),
        StorageType::AbsolutePath => {
            // Only a vector under the table's root is reachable through its store.
            let absolute = Url::parse(&dv.path_or_inline_dv)
                .map_err(|e| corrupt(dv, &format!("invalid absolute path: {e}")))?;
            let root = table_url.as_str().trim_end_matches('/');
            absolute
                .as_str()
                .strip_prefix(root)
                .and_then(|rest| rest.strip_prefix('/'))
                .map(Path::from)
                .ok_or_else(|| {
                    DeltaLiteError::UnsupportedTable(format!(
                        "deletion vector {absolute} lies outside the table at {table_url}"
                    ))
                })
        }
    }
}

/// The file of a `u` descriptor: an optional prefix folder, then the z85 UUID's name.
fn relative_file(dv: &DeletionVectorDescriptor) -> Result<Path> {
    let encoded = &dv.path_or_inline_dv;
    let split = encoded
        .len()
        .checked_sub(ENCODED_UUID_LEN)
        .filter(|&at| encoded.is_char_boundary(at))
        .ok_or_else(|| corrupt(dv, "path too short for a UUID"))?;
    let (prefix, id) = encoded.split_at(split);
    let uuid = z85::decode(id)
        .ok()
        .and_then(|raw| uuid::Uuid::from_slice(&raw).ok())
        .ok_or_else(|| corrupt(dv, "the path does not end in a z85 UUID"))?;
    let name = format!("deletion_vector_{uuid}.bin");
    Ok(Path::from(if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }))
}

/// Decode magic + bitmap.
fn bitmap(dv: &DeletionVectorDescriptor, bytes: &[u8]) -> Result<RoaringTreemap> {
    let magic = u32::from_le_bytes(word(bytes, 0)?);
    if magic != MAGIC {
        return Err(corrupt(dv, &format!("unknown magic {magic}")));
    }
    RoaringTreemap::deserialize_from(&bytes[4..])
        .map_err(|e| corrupt(dv, &format!("bad bitmap: {e}")))
}

fn word(bytes: &[u8], at: usize) -> Result<[u8; 4]> {
    bytes
        .get(at..at + 4)
        .and_then(|w| w.try_into().ok())
        .ok_or_else(|| DeltaLiteError::Other("deletion vector truncated".into()))
}

fn crc32(bytes: &[u8]) -> u32 {
    crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(bytes)
}

fn corrupt(dv: &DeletionVectorDescriptor, what: &str) -> DeltaLiteError {
    DeltaLiteError::Other(format!(
        "deletion vector {}{}: {what}",
        dv.storage_type, dv.path_or_inline_dv
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use object_store::memory::InMemory;

    fn table() -> (Arc<dyn ObjectStore>, Url) {
        (
            Arc::new(InMemory::new()),
            Url::parse("memory:///t/").unwrap(),
        )
    }

    #[tokio::test]
    async fn a_written_vector_reads_back() {
        let (store, url) = table();
        let deleted: RoaringTreemap = [0u64, 7, 65_536, 5_000_000_000].into_iter().collect();
        let dv = write(&store, [&deleted]).await.unwrap().remove(0);
        assert_eq!(dv.storage_type, StorageType::UuidRelativePath);
        assert_eq!(dv.offset, Some(1));
        assert_eq!(dv.cardinality, 4);
        assert_eq!(read(&store, &url, &dv).await.unwrap(), deleted);
    }

    #[tokio::test]
    async fn one_call_writes_its_vectors_into_one_file() {
        let (store, url) = table();
        let a: RoaringTreemap = [1u64, 2, 3].into_iter().collect();
        let b: RoaringTreemap = (0..100_000u64).step_by(3).collect();
        let c: RoaringTreemap = [9u64].into_iter().collect();
        let dvs = write(&store, [&a, &b, &c]).await.unwrap();
        assert_eq!(dvs.len(), 3);
        let path = file_path(&url, &dvs[0]).unwrap();
        assert!(dvs.iter().all(|dv| file_path(&url, dv).unwrap() == path));
        assert_eq!(dvs[0].offset, Some(1));
        assert!(dvs[0].offset < dvs[1].offset && dvs[1].offset < dvs[2].offset);
        for (dv, want) in dvs.iter().zip([&a, &b, &c]) {
            assert_eq!(&read(&store, &url, dv).await.unwrap(), want);
        }
        let files = store
            .list(None)
            .map(|m| m.unwrap().location)
            .collect::<Vec<_>>()
            .await;
        assert_eq!(files, vec![path]);
        assert!(write(&store, []).await.unwrap().is_empty());
        assert_eq!(store.list(None).count().await, 1, "no vectors, no file");
    }

    #[tokio::test]
    async fn inline_vectors_decode() {
        let (store, url) = table();
        let deleted: RoaringTreemap = [3u64, 4, 9].into_iter().collect();
        let mut bytes = MAGIC.to_le_bytes().to_vec();
        deleted.serialize_into(&mut bytes).unwrap();
        let dv = DeletionVectorDescriptor {
            storage_type: StorageType::Inline,
            path_or_inline_dv: z85::encode(&bytes),
            offset: None,
            size_in_bytes: bytes.len() as i32,
            cardinality: 3,
        };
        assert_eq!(read(&store, &url, &dv).await.unwrap(), deleted);
    }

    #[tokio::test]
    async fn a_corrupted_vector_is_refused() {
        let (store, url) = table();
        let deleted: RoaringTreemap = [1u64, 2].into_iter().collect();
        let dv = write(&store, [&deleted]).await.unwrap().remove(0);
        let path = file_path(&url, &dv).unwrap();
        let mut bytes = store
            .get(&path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec();
        let last = bytes.len() - 6;
        bytes[last] ^= 0xff;
        store.put(&path, bytes.into()).await.unwrap();
        let err = read(&store, &url, &dv).await.unwrap_err().to_string();
        assert!(err.ends_with("checksum mismatch"), "{err}");

        let wrong = DeletionVectorDescriptor {
            cardinality: 3,
            ..write(&store, [&deleted]).await.unwrap().remove(0)
        };
        let err = read(&store, &url, &wrong).await.unwrap_err().to_string();
        assert!(err.ends_with("2 positions, the log says 3"), "{err}");
    }

    #[test]
    fn prefixed_and_absolute_paths_resolve_under_the_table() {
        let url = Url::parse("s3://b/t/").unwrap();
        let uuid = uuid::Uuid::nil();
        let dv = |storage_type, path: String| DeletionVectorDescriptor {
            storage_type,
            path_or_inline_dv: path,
            offset: Some(1),
            size_in_bytes: 0,
            cardinality: 0,
        };
        let relative = dv(
            StorageType::UuidRelativePath,
            format!("ab{}", z85::encode(uuid.as_bytes())),
        );
        assert_eq!(
            file_path(&url, &relative).unwrap().as_ref(),
            format!("ab/deletion_vector_{uuid}.bin")
        );
        let inside = dv(StorageType::AbsolutePath, "s3://b/t/x/d.bin".into());
        assert_eq!(file_path(&url, &inside).unwrap().as_ref(), "x/d.bin");
        let outside = dv(StorageType::AbsolutePath, "s3://b/other/d.bin".into());
        assert!(matches!(
            file_path(&url, &outside),
            Err(DeltaLiteError::UnsupportedTable(_))
        ));
    }
}
