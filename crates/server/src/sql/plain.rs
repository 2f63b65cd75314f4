//! Plain Arrow types: view types and dictionaries replaced by what they hold.
//!
//! DataFusion reads Delta tables' strings as `Utf8View`, whose values point into the
//! decoded Parquet pages: what clients receive, and what a statement holds on to, are cast
//! to plain types, which copies only the values a batch uses.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// View types to their plain equivalents and dictionaries to their values, at any depth,
/// so outputs carry the types clients (and readers that trust an embedded Arrow schema)
/// expect.
fn plain_type(dt: &DataType) -> DataType {
    let field = |f: &Field| {
        Arc::new(
            Field::new(f.name(), plain_type(f.data_type()), f.is_nullable())
                .with_metadata(f.metadata().clone()),
        )
    };
    match dt {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::Dictionary(_, value) => plain_type(value),
        DataType::List(f) => DataType::List(field(f)),
        DataType::LargeList(f) => DataType::LargeList(field(f)),
        DataType::ListView(f) => DataType::List(field(f)),
        DataType::LargeListView(f) => DataType::LargeList(field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(|f| field(f)).collect()),
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        other => other.clone(),
    }
}

/// A schema with view types replaced by their plain equivalents.
pub fn plain_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| {
                Field::new(f.name(), plain_type(f.data_type()), f.is_nullable())
                    .with_metadata(f.metadata().clone())
            })
            .collect::<Vec<_>>(),
    ))
}

/// A batch with view types (and dictionaries) cast to the types of [`plain_schema`].
pub fn plain_batch(batch: &RecordBatch) -> RecordBatch {
    let schema = plain_schema(&batch.schema());
    let columns: Result<Vec<_>, _> = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| arrow::compute::cast(c, f.data_type()))
        .collect();
    columns
        .and_then(|c| RecordBatch::try_new(schema, c))
        .unwrap_or_else(|_| batch.clone())
}
