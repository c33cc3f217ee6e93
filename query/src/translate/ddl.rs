//! CREATE TABLE, CREATE INDEX, DROP.

use sqlparser::ast::{
    ColumnOption as SqlColumnOption, CreateIndex as SqlCreateIndex, CreateTable as SqlCreateTable,
    DataType as SqlDataType, Expr as SqlExpr, IndexColumn as SqlIndexColumn,
    ObjectName as SqlObjectName, ObjectType as SqlObjectType,
    TableConstraint as SqlTableConstraint,
};

use super::{ident, object_name};
use crate::ast::{ColumnDef, Statement};
use crate::error::{QueryError, Result, unsupported};
use crate::value::DataType;

pub(crate) fn data_type(t: &SqlDataType) -> Result<DataType> {
    Ok(match t {
        // PostgreSQL's names too (`int8`, `int4`, `int2`, `smallint`): psql users write them.
        SqlDataType::BigInt(_)
        | SqlDataType::Int(_)
        | SqlDataType::Integer(_)
        | SqlDataType::Int64
        | SqlDataType::Int8(_)
        | SqlDataType::Int4(_)
        | SqlDataType::Int2(_)
        | SqlDataType::SmallInt(_) => DataType::BigInt,
        SqlDataType::Double(_)
        | SqlDataType::DoublePrecision
        | SqlDataType::Real
        | SqlDataType::Float(_)
        | SqlDataType::Float64
        | SqlDataType::Float8
        | SqlDataType::Float4 => DataType::Double,
        SqlDataType::Text
        | SqlDataType::Varchar(_)
        | SqlDataType::CharacterVarying(_)
        | SqlDataType::String(_) => DataType::Text,
        SqlDataType::Blob(_) | SqlDataType::Bytea => DataType::Blob,
        SqlDataType::Boolean | SqlDataType::Bool => DataType::Boolean,
        other => return unsupported(format!("the type {other}")),
    })
}

fn index_column(c: &SqlIndexColumn) -> Result<String> {
    if c.operator_class.is_some() || c.column.with_fill.is_some() {
        return unsupported(format!("the index column `{c}`"));
    }
    // Keys and indexes are ascending; `ASC` may be written, `DESC` is refused, not ignored.
    match &c.column.options.sort {
        None | Some(sqlparser::ast::OrderBySort::Asc) => {}
        Some(_) => return unsupported(format!("descending or custom key order (`{c}`)")),
    }
    if c.column.options.nulls_first.is_some() {
        return unsupported(format!("NULLS FIRST/LAST in keys (`{c}`)"));
    }
    match &c.column.expr {
        SqlExpr::Identifier(i) => Ok(ident(i)),
        other => unsupported(format!("an index on an expression (`{other}`)")),
    }
}

pub(crate) fn create_table(t: &SqlCreateTable) -> Result<Statement> {
    if t.or_replace {
        return unsupported("CREATE OR REPLACE TABLE");
    }
    if t.temporary {
        return unsupported("a temporary table");
    }
    if t.external {
        return unsupported("an external table");
    }
    if t.query.is_some() {
        return unsupported("CREATE TABLE ... AS SELECT");
    }
    if t.like.is_some() || t.clone.is_some() {
        return unsupported("CREATE TABLE ... LIKE");
    }
    if t.partition_by.is_some() || t.order_by.is_some() || t.cluster_by.is_some() {
        return unsupported("a table partitioning or clustering option");
    }
    // Any other option a dialect parses (`WITHOUT ROWID`, `STRICT`, `UNLOGGED`, `WITH (...)`,
    // `ENGINE = ...`, `COMMENT`, ...) is refused rather than ignored: the table must be what
    // a plain CREATE TABLE with the same name, columns and constraints would give.
    let plain = sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder::new(t.name.clone())
        .if_not_exists(t.if_not_exists)
        .columns(t.columns.clone())
        .constraints(t.constraints.clone())
        .build();
    if plain != *t {
        return unsupported(
            "CREATE TABLE options other than IF NOT EXISTS, columns and PRIMARY KEY \
             (WITHOUT ROWID, STRICT, UNLOGGED, WITH (...), ENGINE = ..., COMMENT, ...)",
        );
    }
    let name = object_name(&t.name)?;
    let mut columns = Vec::new();
    let mut primary_key: Vec<String> = Vec::new();
    for c in &t.columns {
        let col_name = ident(&c.name);
        let mut not_null = false;
        let mut null = false;
        let mut primary = false;
        for o in &c.options {
            match &o.option {
                SqlColumnOption::Null => null = true,
                SqlColumnOption::NotNull => not_null = true,
                SqlColumnOption::PrimaryKey(_) => {
                    primary = true;
                    if !primary_key.is_empty() {
                        return Err(QueryError::Translate(format!(
                            "table {name} has more than one PRIMARY KEY"
                        )));
                    }
                    primary_key.push(col_name.clone());
                }
                SqlColumnOption::Unique(_) => return unsupported("a UNIQUE constraint"),
                SqlColumnOption::Default(_) => return unsupported("a DEFAULT value"),
                SqlColumnOption::Check(_) => return unsupported("a CHECK constraint"),
                SqlColumnOption::ForeignKey(_) => return unsupported("a foreign key"),
                other => return unsupported(format!("the column option {other}")),
            }
        }
        if null && (not_null || primary) {
            return Err(QueryError::Translate(format!(
                "conflicting NULL/NOT NULL declarations for column {col_name}"
            )));
        }
        if columns.iter().any(|c: &ColumnDef| c.name == col_name) {
            return Err(QueryError::Translate(format!(
                "column {col_name} is declared twice"
            )));
        }
        columns.push(ColumnDef {
            name: col_name,
            ty: data_type(&c.data_type)?,
            not_null,
        });
    }
    for constraint in &t.constraints {
        match constraint {
            SqlTableConstraint::PrimaryKey(pk) => {
                if !primary_key.is_empty() {
                    return Err(QueryError::Translate(format!(
                        "table {name} has more than one PRIMARY KEY"
                    )));
                }
                for c in &pk.columns {
                    primary_key.push(index_column(c)?);
                }
            }
            SqlTableConstraint::Unique(_) => return unsupported("a UNIQUE constraint"),
            SqlTableConstraint::ForeignKey(_) => return unsupported("a foreign key"),
            SqlTableConstraint::Check(_) => return unsupported("a CHECK constraint"),
            other => return unsupported(format!("the table constraint {other}")),
        }
    }
    // A missing PRIMARY KEY is refused when the statement runs, after IF NOT EXISTS has
    // had its say: an existing table makes the statement a no-op whatever its definition.
    if columns.is_empty() {
        return Err(QueryError::Translate(format!(
            "table {name} has no columns"
        )));
    }
    Ok(Statement::CreateTable {
        name,
        columns,
        primary_key,
        if_not_exists: t.if_not_exists,
    })
}

pub(crate) fn create_index(c: &SqlCreateIndex) -> Result<Statement> {
    if c.unique {
        return unsupported("a UNIQUE index");
    }
    if c.using.is_some() {
        return unsupported("CREATE INDEX ... USING");
    }
    if c.predicate.is_some() {
        return unsupported("a partial index (CREATE INDEX ... WHERE)");
    }
    if !c.include.is_empty() || !c.with.is_empty() || c.concurrently {
        return unsupported("a CREATE INDEX option");
    }
    let name = match &c.name {
        Some(n) => object_name(n)?,
        None => {
            return Err(QueryError::Translate(
                "CREATE INDEX needs a name".to_owned(),
            ));
        }
    };
    let column = match c.columns.as_slice() {
        [one] => index_column(one)?,
        _ => return unsupported("an index on more than one column"),
    };
    Ok(Statement::CreateIndex {
        name,
        table: object_name(&c.table_name)?,
        column,
        if_not_exists: c.if_not_exists,
    })
}

pub(crate) fn drop(
    object_type: SqlObjectType,
    if_exists: bool,
    names: &[SqlObjectName],
    cascade: bool,
) -> Result<Statement> {
    if cascade {
        return unsupported("DROP ... CASCADE");
    }
    let name = match names {
        [one] => object_name(one)?,
        _ => return unsupported("dropping more than one object at once"),
    };
    match object_type {
        SqlObjectType::Table => Ok(Statement::DropTable { name, if_exists }),
        SqlObjectType::Index => Ok(Statement::DropIndex { name, if_exists }),
        other => unsupported(format!("DROP {other}")),
    }
}
