//! Table and index definitions, and where everything lives in the engine's key space.
//!
//! The SQL layer shares the engine's single key space with other users, so it reserves three
//! one-byte prefixes (`docs/format/keys.md`, "Key space"):
//!
//! ```text
//! 0xF0 0x00                          -> meta: format version u32-LE, next id u32-LE
//! 0xF0 0x01 table-name               -> table record (codec::schema)
//! 0xF1 table-id u32-BE pk-value*     -> row (codec::row)
//! 0xF2 index-id u32-BE value pk-value* -> empty
//! ```
//!
//! Names are stored as given after case folding (unquoted identifiers are lowercased).
//! Ids are never reused, so rows of a dropped table that were not deleted yet can never be
//! mistaken for rows of a new table.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::codec::key::{encode_id, encode_value};
use crate::value::{DataType, Value};

/// First byte of every catalog key. DO NOT CHANGE: on-disk.
pub const CATALOG_PREFIX: u8 = 0xF0;
/// First byte of every row key. DO NOT CHANGE: on-disk.
pub const TABLE_PREFIX: u8 = 0xF1;
/// First byte of every index entry key. DO NOT CHANGE: on-disk.
pub const INDEX_PREFIX: u8 = 0xF2;
/// Second byte of the meta key. DO NOT CHANGE: on-disk.
pub const META_KEY: [u8; 2] = [CATALOG_PREFIX, 0x00];
/// Second byte of table record keys. DO NOT CHANGE: on-disk.
pub const TABLE_RECORD_TAG: u8 = 0x01;
/// Version of the SQL layer's on-disk format (keys, rows, catalog records).
pub const FORMAT_VERSION: u32 = 1;
/// Length of a table or index key prefix: the prefix byte and a 4-byte id.
pub const ID_PREFIX_LEN: usize = 5;

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Column name (case-folded).
    pub name: String,
    /// Column type.
    pub ty: DataType,
    /// `NOT NULL` was declared, or the column is part of the primary key.
    pub not_null: bool,
}

/// A secondary index over one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    /// Index name, unique in the database.
    pub name: String,
    /// Id used in the index's key prefix.
    pub id: u32,
    /// Position of the indexed column in the table.
    pub column: usize,
}

impl IndexDef {
    /// `0xF2 id`: every entry of this index starts with these bytes.
    pub fn key_prefix(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(ID_PREFIX_LEN);
        k.push(INDEX_PREFIX);
        encode_id(&mut k, self.id);
        k
    }
}

/// A table definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// Table name (case-folded).
    pub name: String,
    /// Id used in the row keys' prefix.
    pub id: u32,
    /// Columns in declaration order.
    pub columns: Vec<Column>,
    /// Positions of the primary-key columns, in key order (at least one).
    pub primary_key: Vec<usize>,
    /// Secondary indexes.
    pub indexes: Vec<IndexDef>,
    /// Columns stored in the row value: those not in the primary key, in order.
    value_columns: Vec<usize>,
}

impl TableSchema {
    /// Builds a schema; primary-key columns are marked NOT NULL.
    pub fn new(name: String, id: u32, mut columns: Vec<Column>, primary_key: Vec<usize>) -> Self {
        for &c in &primary_key {
            if let Some(col) = columns.get_mut(c) {
                col.not_null = true;
            }
        }
        let value_columns = (0..columns.len())
            .filter(|c| !primary_key.contains(c))
            .collect();
        TableSchema {
            name,
            id,
            columns,
            primary_key,
            indexes: Vec::new(),
            value_columns,
        }
    }

    /// The columns stored in the row value (not in the primary key), in declaration order.
    pub fn value_columns(&self) -> &[usize] {
        &self.value_columns
    }

    /// Position of the column called `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// True when column `c` is part of the primary key.
    pub fn is_key_column(&self, c: usize) -> bool {
        self.primary_key.contains(&c)
    }

    /// `0xF1 id`: every row key of this table starts with these bytes.
    pub fn key_prefix(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(ID_PREFIX_LEN + 16);
        k.push(TABLE_PREFIX);
        encode_id(&mut k, self.id);
        k
    }

    /// Appends the encoded primary key of `row` (no prefix).
    pub fn encode_key_values(&self, row: &[Value], out: &mut Vec<u8>) {
        for &c in &self.primary_key {
            encode_value(out, row.get(c).unwrap_or(&Value::Null));
        }
    }

    /// The full row key of `row`.
    pub fn row_key(&self, row: &[Value]) -> Vec<u8> {
        let mut k = self.key_prefix();
        self.encode_key_values(row, &mut k);
        k
    }

    /// The index whose column is `c`, if any.
    pub fn index_on(&self, c: usize) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.column == c)
    }
}

/// Key of the catalog record of table `name`.
pub fn table_record_key(name: &str) -> Vec<u8> {
    let mut k = vec![CATALOG_PREFIX, TABLE_RECORD_TAG];
    k.extend_from_slice(name.as_bytes());
    k
}

/// The in-memory catalog: every table, by name. Immutable; DDL builds a new one.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Tables by name.
    pub tables: BTreeMap<String, Arc<TableSchema>>,
    /// Next table or index id to hand out.
    pub next_id: u32,
}

impl Catalog {
    /// The table called `name`.
    pub fn table(&self, name: &str) -> Option<&Arc<TableSchema>> {
        self.tables.get(name)
    }

    /// The table owning the index called `name`.
    pub fn index_owner(&self, name: &str) -> Option<&Arc<TableSchema>> {
        self.tables
            .values()
            .find(|t| t.indexes.iter().any(|i| i.name == name))
    }
}
