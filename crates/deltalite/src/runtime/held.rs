//! What a batch holds in memory, for the guards that bound a caller's data.
//!
//! `RecordBatch::get_array_memory_size` counts each array's whole allocation. Arrays
//! decoded from Arrow IPC (Flight, IPC files, memory maps) are slices of the message's one
//! body buffer, so it counts that body once per column: a one-row batch of 3,500 bound
//! values, a few hundred KB on the wire, measured as gigabytes. Here each allocation
//! counts once.

use std::collections::HashSet;

use arrow::array::{Array, ArrayData, RecordBatch};

/// The bytes of the distinct allocations `batch`'s arrays hold.
pub fn batch_bytes(batch: &RecordBatch) -> usize {
    let mut seen = HashSet::new();
    let mut total = 0usize;
    for column in batch.columns() {
        add_allocations(&column.to_data(), &mut seen, &mut total);
    }
    total
}

/// [`batch_bytes`] summed over batches. An allocation two batches share (slices of one
/// table) counts in each: an overcount, never an undercount.
pub fn batches_bytes(batches: &[RecordBatch]) -> usize {
    batches.iter().map(batch_bytes).sum()
}

fn add_allocations(data: &ArrayData, seen: &mut HashSet<usize>, total: &mut usize) {
    let nulls = data.nulls().map(|n| n.buffer());
    for buffer in data.buffers().iter().chain(nulls) {
        if seen.insert(buffer.data_ptr().as_ptr() as usize) {
            *total = total.saturating_add(buffer.capacity());
        }
    }
    for child in data.child_data() {
        add_allocations(child, seen, total);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::ipc::reader::StreamReader;
    use arrow::ipc::writer::StreamWriter;

    use super::*;

    fn wide_batch(columns: usize) -> RecordBatch {
        let arrays: Vec<(String, ArrayRef)> = (0..columns)
            .map(|i| {
                let array: ArrayRef = if i % 2 == 0 {
                    Arc::new(StringArray::from(vec![format!("value {i}")]))
                } else {
                    Arc::new(Int64Array::from(vec![i as i64]))
                };
                (format!("c{i}"), array)
            })
            .collect();
        RecordBatch::try_from_iter(arrays).unwrap()
    }

    /// Decoded from IPC, every column is a slice of one body: counted once, the batch
    /// holds about what was sent, where `get_array_memory_size` counts it per column.
    #[test]
    fn an_ipc_body_shared_by_every_column_counts_once() {
        let batch = wide_batch(2_000);
        let mut sent = Vec::new();
        let mut writer = StreamWriter::try_new(&mut sent, &batch.schema()).unwrap();
        writer.write(&batch).unwrap();
        writer.finish().unwrap();
        drop(writer);
        let decoded = StreamReader::try_new(Cursor::new(sent.clone()), None)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let held = batch_bytes(&decoded);
        assert!(held <= sent.len(), "{held} held of {} sent", sent.len());
        assert!(held >= 2_000 * 8, "{held}");
        assert!(decoded.get_array_memory_size() > 500 * sent.len());
    }

    /// Arrays built apart each own their buffers: all are counted.
    #[test]
    fn separate_allocations_all_count() {
        let batch = wide_batch(10);
        let buffers: usize = batch
            .columns()
            .iter()
            .map(|c| c.to_data().get_buffer_memory_size())
            .sum();
        assert_eq!(batch_bytes(&batch), buffers);
        assert_eq!(batches_bytes(&[batch.clone(), batch.clone()]), 2 * buffers);
    }
}
