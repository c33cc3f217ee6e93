//! sqlparser's AST → our AST ([`crate::ast`]), refusing everything outside the supported
//! subset with [`QueryError::Unsupported`] naming the construct.
//!
//! Identifiers are case-folded here: unquoted names are lowercased, quoted names kept.

mod ddl;
mod depth;
mod expr;

use sqlparser::ast::{
    AssignmentTarget as SqlAssignmentTarget, ConflictTarget as SqlConflictTarget,
    Distinct as SqlDistinct, Expr as SqlExpr, FromTable as SqlFromTable,
    GroupByExpr as SqlGroupByExpr, Ident as SqlIdent, LimitClause as SqlLimitClause,
    ObjectName as SqlObjectName, ObjectNamePart as SqlObjectNamePart,
    OnConflictAction as SqlOnConflictAction, OnInsert as SqlOnInsert,
    OrderByKind as SqlOrderByKind, OrderBySort as SqlOrderBySort, Query as SqlQuery,
    Select as SqlSelect, SelectItem as SqlSelectItem,
    SelectItemQualifiedWildcardKind as SqlQualifiedWildcardKind, SetExpr as SqlSetExpr,
    SqliteOnConflict as SqlSqliteOnConflict, Statement as SqlStatement,
    TableFactor as SqlTableFactor, TableObject as SqlTableObject,
    TableWithJoins as SqlTableWithJoins, WildcardAdditionalOptions as SqlWildcardOptions,
};

use crate::ast::{Expr, Insert, OnConflict, OrderItem, OrderKey, Select, SelectItem, Statement};
use crate::error::{QueryError, Result, unsupported};
use crate::plan::PlanMemo;
use crate::value::Value;

pub use depth::MAX_EXPR_DEPTH;

/// Case-folds an identifier: unquoted → lowercase, quoted → as written.
pub(crate) fn ident(i: &SqlIdent) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// `name` as SQL text that `ident` reads back as `name`: bare when it is a lowercase
/// identifier (`[a-z_][a-z0-9_]*`) that reads back as itself wherever a schema prints it, else
/// double-quoted with `"` doubled (`"My Table"`, `"select"`, `"key"`, `"we""ird"`, `"Count"`:
/// an unquoted name is lowercased). Used to print schemas that can be run again.
pub fn quote_ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain && reads_back_bare(name) {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// True when the plain name `name` can stay unquoted: it is not a keyword, or it is an
/// unreserved one that the parser still takes as a name in every place a schema prints names
/// (`count` and `id` are; `key` is not, and reserved words such as `select` and `order` are
/// always quoted, since a query could not name them bare). The parser decides, so this
/// follows the dialect.
fn reads_back_bare(name: &str) -> bool {
    use sqlparser::keywords::{
        ALL_KEYWORDS, ALL_KEYWORDS_INDEX, RESERVED_FOR_COLUMN_ALIAS, RESERVED_FOR_TABLE_ALIAS,
    };
    let upper = name.to_ascii_uppercase();
    let Ok(i) = ALL_KEYWORDS.binary_search(&upper.as_str()) else {
        return true;
    };
    if ALL_KEYWORDS_INDEX.get(i).is_none_or(|k| {
        RESERVED_FOR_COLUMN_ALIAS.contains(k) || RESERVED_FOR_TABLE_ALIAS.contains(k)
    }) {
        return false;
    }
    let sql = format!(
        "CREATE TABLE {name} ({name} INT NOT NULL, PRIMARY KEY ({name})); \
         CREATE INDEX {name} ON {name} ({name})"
    );
    let Ok(parsed) = crate::parse::parse(&sql) else {
        return false;
    };
    let [table, index] = parsed.as_slice() else {
        return false;
    };
    let table_ok = matches!(
        statement(table),
        Ok(Statement::CreateTable { name: t, columns, primary_key, .. })
            if t == name
                && columns.len() == 1
                && columns.iter().all(|c| c.name == name)
                && primary_key == [name]
    );
    let index_ok = matches!(
        statement(index),
        Ok(Statement::CreateIndex { name: i, table, column, .. })
            if i == name && table == name && column == name
    );
    table_ok && index_ok
}

/// A one-part object name (`reads`, not `db.reads`).
pub(crate) fn object_name(n: &SqlObjectName) -> Result<String> {
    match n.0.as_slice() {
        [SqlObjectNamePart::Identifier(i)] => Ok(ident(i)),
        _ => unsupported(format!("a qualified name like `{n}`")),
    }
}

/// The table a statement reads, for checking column qualifiers (`reads.seq`, `r.seq`).
#[derive(Debug, Default)]
pub(crate) struct Scope {
    names: Vec<String>,
}

impl Scope {
    fn table(name: &str, alias: Option<String>) -> Self {
        let mut names = vec![name.to_owned()];
        names.extend(alias);
        Scope { names }
    }

    fn check_qualifier(&self, q: &str) -> Result<()> {
        if self.names.iter().any(|n| n == q) {
            Ok(())
        } else {
            Err(QueryError::UnknownQualifier(q.to_owned()))
        }
    }
}

/// Translates one parsed statement.
///
/// # Errors
/// [`QueryError::Unsupported`] for constructs outside the subset, [`QueryError::Translate`]
/// for malformed uses of supported ones and for expressions nested deeper than
/// [`MAX_EXPR_DEPTH`].
pub fn statement(s: &SqlStatement) -> Result<Statement> {
    depth::check(s)?;
    match s {
        SqlStatement::Query(q) => Ok(Statement::Select(Box::new(query(q)?))),
        SqlStatement::Insert(i) => insert(i).map(Statement::Insert),
        SqlStatement::Update(u) => {
            if u.from.is_some() {
                return unsupported("UPDATE ... FROM");
            }
            if u.returning.is_some() || u.output.is_some() {
                return unsupported("RETURNING");
            }
            if !u.order_by.is_empty() || u.limit.is_some() {
                return unsupported("UPDATE ... ORDER BY / LIMIT");
            }
            if u.or.is_some() {
                return unsupported("UPDATE OR ...");
            }
            let (table, scope) = table_with_joins(&u.table)?;
            let mut assignments = Vec::new();
            for a in &u.assignments {
                let col = match &a.target {
                    SqlAssignmentTarget::ColumnName(n) => object_name(n)?,
                    SqlAssignmentTarget::Tuple(_) => return unsupported("a tuple assignment"),
                };
                if assignments.iter().any(|(c, _)| *c == col) {
                    return Err(QueryError::Translate(format!(
                        "column {col} is assigned twice"
                    )));
                }
                let value = expr::expr(&a.value, &scope)?;
                if value.has_aggregate() {
                    return Err(QueryError::Translate(
                        "aggregate functions are not allowed in UPDATE".to_owned(),
                    ));
                }
                assignments.push((col, value));
            }
            Ok(Statement::Update {
                table,
                assignments,
                filter: write_filter(u.selection.as_ref(), &scope)?,
            })
        }
        SqlStatement::Delete(d) => {
            if !d.tables.is_empty() || d.using.is_some() {
                return unsupported("multi-table DELETE");
            }
            if d.returning.is_some() || d.output.is_some() {
                return unsupported("RETURNING");
            }
            if !d.order_by.is_empty() || d.limit.is_some() {
                return unsupported("DELETE ... ORDER BY / LIMIT");
            }
            // `DELETE t` (no FROM), which sqlparser accepts as Oracle and MySQL do, is not
            // PostgreSQL's or SQLite's SQL: a typo there should not delete every row.
            let from = match &d.from {
                SqlFromTable::WithFromKeyword(f) => f,
                SqlFromTable::WithoutKeyword(_) => {
                    return unsupported("DELETE without FROM (write DELETE FROM t)");
                }
            };
            let [one] = from.as_slice() else {
                return unsupported("multi-table DELETE");
            };
            let (table, scope) = table_with_joins(one)?;
            Ok(Statement::Delete {
                table,
                filter: write_filter(d.selection.as_ref(), &scope)?,
            })
        }
        SqlStatement::CreateTable(t) => ddl::create_table(t),
        SqlStatement::CreateIndex(c) => ddl::create_index(c),
        SqlStatement::Drop {
            object_type,
            if_exists,
            names,
            cascade,
            ..
        } => ddl::drop(*object_type, *if_exists, names, *cascade),
        SqlStatement::ShowTables { show_options, .. } => {
            if show_options.filter_position.is_some() || show_options.show_in.is_some() {
                return unsupported("SHOW TABLES with filters");
            }
            Ok(Statement::ShowTables)
        }
        SqlStatement::ExplainTable {
            table_name,
            hive_format,
            ..
        } => {
            if hive_format.is_some() {
                return unsupported("DESCRIBE FORMATTED / EXTENDED");
            }
            Ok(Statement::Describe {
                table: object_name(table_name)?,
            })
        }
        SqlStatement::Explain {
            analyze,
            statement: inner,
            format,
            options,
            ..
        } => {
            if *analyze {
                return unsupported("EXPLAIN ANALYZE");
            }
            if format.is_some() || options.is_some() {
                return unsupported("an EXPLAIN option");
            }
            let inner = statement(inner)?;
            if matches!(inner, Statement::Explain(_)) {
                return unsupported("EXPLAIN EXPLAIN");
            }
            Ok(Statement::Explain(Box::new(inner)))
        }
        SqlStatement::StartTransaction { .. }
        | SqlStatement::Commit { .. }
        | SqlStatement::Rollback { .. } => {
            unsupported("a transaction (each statement is atomic on its own)")
        }
        SqlStatement::AlterTable(_) => unsupported("ALTER TABLE"),
        SqlStatement::CreateView(_) => unsupported("a view"),
        other => {
            let text = other.to_string();
            let words: Vec<&str> = text.split_whitespace().take(2).collect();
            unsupported(format!("the statement {}", words.join(" ")))
        }
    }
}

/// The `WHERE` of an `UPDATE` or `DELETE`, translated; aggregates are refused there, as in a
/// `SELECT`'s `WHERE`.
fn write_filter(selection: Option<&SqlExpr>, scope: &Scope) -> Result<Option<Expr>> {
    let filter = selection.map(|e| expr::expr(e, scope)).transpose()?;
    if filter.as_ref().is_some_and(Expr::has_aggregate) {
        return Err(QueryError::Translate(
            "aggregate functions are not allowed in WHERE".to_owned(),
        ));
    }
    Ok(filter)
}

fn table_with_joins(t: &SqlTableWithJoins) -> Result<(String, Scope)> {
    if !t.joins.is_empty() {
        return unsupported("JOIN");
    }
    match &t.relation {
        SqlTableFactor::Table {
            name,
            alias,
            args,
            with_hints,
            version,
            partitions,
            with_ordinality,
            json_path,
            sample,
            index_directives,
            inheritance,
        } => {
            if args.is_some() {
                return unsupported("a table function");
            }
            if sample.is_some() {
                return unsupported("TABLESAMPLE");
            }
            if !with_hints.is_empty()
                || version.is_some()
                || !partitions.is_empty()
                || *with_ordinality
                || json_path.is_some()
                || !index_directives.is_empty()
                || inheritance.is_some()
            {
                return unsupported(format!("the table reference `{}`", t.relation));
            }
            let name = object_name(name)?;
            let alias = match alias {
                Some(a) if !a.columns.is_empty() => {
                    return unsupported("a column alias list on a table");
                }
                Some(a) => Some(ident(&a.name)),
                None => None,
            };
            let scope = Scope::table(&name, alias);
            Ok((name, scope))
        }
        SqlTableFactor::Derived { .. } => unsupported("a subquery in FROM"),
        other => unsupported(format!("the table reference `{other}`")),
    }
}

fn insert(i: &sqlparser::ast::Insert) -> Result<Insert> {
    let table = match &i.table {
        SqlTableObject::TableName(n) => object_name(n)?,
        _ => return unsupported("INSERT into a table function"),
    };
    if i.returning.is_some() || i.output.is_some() {
        return unsupported("RETURNING");
    }
    if !i.assignments.is_empty() {
        return unsupported("INSERT ... SET");
    }
    if i.overwrite || i.partitioned.is_some() || i.table_alias.is_some() {
        return unsupported("INSERT OVERWRITE, PARTITION and table aliases in INSERT");
    }
    let mut on_conflict = match &i.or {
        None | Some(SqlSqliteOnConflict::Abort) => OnConflict::Error,
        Some(SqlSqliteOnConflict::Replace) => OnConflict::Replace,
        Some(SqlSqliteOnConflict::Ignore) => OnConflict::DoNothing,
        Some(other) => return unsupported(format!("INSERT {other}")),
    };
    if i.replace_into {
        on_conflict = OnConflict::Replace;
    }
    if i.ignore {
        on_conflict = OnConflict::DoNothing;
    }
    let mut conflict_target = None;
    match &i.on {
        None => {}
        Some(SqlOnInsert::OnConflict(c)) => {
            match &c.conflict_target {
                None => {}
                Some(SqlConflictTarget::Columns {
                    columns,
                    predicate: None,
                }) => {
                    conflict_target = Some(columns.iter().map(ident).collect());
                }
                Some(SqlConflictTarget::Columns { .. }) => {
                    return unsupported("ON CONFLICT (...) WHERE");
                }
                Some(SqlConflictTarget::OnConstraint(_)) => {
                    return unsupported("ON CONFLICT ON CONSTRAINT");
                }
            }
            match c.action {
                SqlOnConflictAction::DoNothing => on_conflict = OnConflict::DoNothing,
                SqlOnConflictAction::DoUpdate(_) => {
                    return unsupported("ON CONFLICT DO UPDATE");
                }
            }
        }
        Some(SqlOnInsert::DuplicateKeyUpdate(_)) => {
            return unsupported("ON DUPLICATE KEY UPDATE");
        }
        Some(_) => return unsupported("this ON clause of INSERT"),
    }
    let columns = if i.columns.is_empty() {
        None
    } else {
        Some(
            i.columns
                .iter()
                .map(object_name)
                .collect::<Result<Vec<_>>>()?,
        )
    };
    let Some(source) = &i.source else {
        return unsupported("INSERT without VALUES");
    };
    if source.with.is_some() || source.order_by.is_some() || source.limit_clause.is_some() {
        return unsupported("INSERT ... SELECT");
    }
    let SqlSetExpr::Values(values) = source.body.as_ref() else {
        return unsupported("INSERT ... SELECT");
    };
    let scope = Scope::default();
    let mut rows = Vec::with_capacity(values.rows.len());
    for (n, row) in values.rows.iter().enumerate() {
        let row: Vec<_> = row
            .iter()
            .map(|e| expr::expr(e, &scope))
            .collect::<Result<_>>()?;
        if let Some(cols) = &columns
            && cols.len() != row.len()
        {
            return Err(QueryError::Translate(format!(
                "VALUES row {} has {} values but {} columns were named",
                n + 1,
                row.len(),
                cols.len()
            )));
        }
        rows.push(row);
    }
    Ok(Insert {
        table,
        columns,
        rows,
        on_conflict,
        conflict_target,
    })
}

fn count_literal(e: &SqlExpr, clause: &'static str) -> Result<u64> {
    match expr::expr(e, &Scope::default())? {
        Expr::Literal(Value::Int(n)) if n >= 0 => Ok(n.cast_unsigned()),
        _ => Err(QueryError::BadRowCount { clause }),
    }
}

fn query(q: &SqlQuery) -> Result<Select> {
    if q.with.is_some() {
        return unsupported("WITH (common table expressions)");
    }
    if q.fetch.is_some() {
        return unsupported("FETCH");
    }
    if !q.locks.is_empty() {
        return unsupported("FOR UPDATE / FOR SHARE");
    }
    if q.for_clause.is_some() || q.settings.is_some() || q.format_clause.is_some() {
        return unsupported(format!("the query `{q}`"));
    }
    if !q.pipe_operators.is_empty() {
        return unsupported("the pipe operator");
    }
    let select = match q.body.as_ref() {
        SqlSetExpr::Select(s) => s,
        SqlSetExpr::SetOperation { op, .. } => return unsupported(op.to_string()),
        SqlSetExpr::Values(_) => return unsupported("VALUES as a query"),
        SqlSetExpr::Query(_) => return unsupported("a subquery"),
        other => return unsupported(format!("the query `{other}`")),
    };
    let (mut out, scope) = select_body(select)?;
    if let Some(order_by) = &q.order_by {
        if order_by.interpolate.is_some() {
            return unsupported("ORDER BY ... INTERPOLATE");
        }
        let exprs = match &order_by.kind {
            SqlOrderByKind::Expressions(e) => e,
            SqlOrderByKind::All(_) => return unsupported("ORDER BY ALL"),
        };
        for o in exprs {
            if o.with_fill.is_some() {
                return unsupported("ORDER BY ... WITH FILL");
            }
            if o.options.nulls_first.is_some() {
                return unsupported("NULLS FIRST / NULLS LAST");
            }
            let desc = match &o.options.sort {
                None | Some(SqlOrderBySort::Asc) => false,
                Some(SqlOrderBySort::Desc) => true,
                Some(SqlOrderBySort::Using(_)) => return unsupported("ORDER BY ... USING"),
            };
            let key = match expr::expr(&o.expr, &scope)? {
                Expr::Column(name) if matches!(o.expr, SqlExpr::Identifier(_)) => {
                    OrderKey::Name(name)
                }
                Expr::Literal(Value::Int(n)) => {
                    let n = usize::try_from(n).ok().filter(|n| *n >= 1).ok_or(
                        QueryError::BadPosition {
                            clause: "ORDER BY",
                            position: n,
                        },
                    )?;
                    OrderKey::Ordinal(n)
                }
                e => OrderKey::Expr(e),
            };
            out.order_by.push(OrderItem { key, desc });
        }
    }
    match &q.limit_clause {
        None => {}
        Some(SqlLimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return unsupported("LIMIT BY");
            }
            out.limit = limit
                .as_ref()
                .map(|l| count_literal(l, "LIMIT"))
                .transpose()?;
            if let Some(o) = offset {
                out.offset = count_literal(&o.value, "OFFSET")?;
            }
        }
        Some(SqlLimitClause::OffsetCommaLimit { offset, limit }) => {
            out.limit = Some(count_literal(limit, "LIMIT")?);
            out.offset = count_literal(offset, "OFFSET")?;
        }
    }
    Ok(out)
}

fn wildcard_options(o: &SqlWildcardOptions) -> Result<()> {
    if o.opt_ilike.is_some()
        || o.opt_exclude.is_some()
        || o.opt_except.is_some()
        || o.opt_replace.is_some()
        || o.opt_rename.is_some()
        || o.opt_alias.is_some()
    {
        return unsupported("`*` with options (EXCLUDE, EXCEPT, REPLACE, RENAME)");
    }
    Ok(())
}

fn select_body(s: &SqlSelect) -> Result<(Select, Scope)> {
    match &s.distinct {
        None | Some(SqlDistinct::All) => {}
        Some(_) => return unsupported("SELECT DISTINCT"),
    }
    if s.top.is_some() {
        return unsupported("TOP");
    }
    if s.into.is_some() {
        return unsupported("SELECT INTO");
    }
    if !s.lateral_views.is_empty() {
        return unsupported("LATERAL VIEW");
    }
    if s.prewhere.is_some()
        || !s.connect_by.is_empty()
        || !s.cluster_by.is_empty()
        || !s.distribute_by.is_empty()
        || !s.sort_by.is_empty()
        || s.value_table_mode.is_some()
        || s.exclude.is_some()
    {
        return unsupported(format!("the SELECT form `{s}`"));
    }
    if !s.named_window.is_empty() || s.qualify.is_some() {
        return unsupported("a window function");
    }
    let (from, scope) = match s.from.as_slice() {
        [] => (None, Scope::default()),
        [one] => {
            let (name, scope) = table_with_joins(one)?;
            (Some(name), scope)
        }
        _ => return unsupported("JOIN"),
    };
    let mut projection = Vec::new();
    for item in &s.projection {
        match item {
            SqlSelectItem::Wildcard(o) => {
                wildcard_options(o)?;
                projection.push(SelectItem::Wildcard);
            }
            SqlSelectItem::QualifiedWildcard(kind, o) => {
                wildcard_options(o)?;
                match kind {
                    SqlQualifiedWildcardKind::ObjectName(n) => {
                        scope.check_qualifier(&object_name(n)?)?;
                    }
                    SqlQualifiedWildcardKind::Expr(_) => {
                        return unsupported(format!("the select item `{item}`"));
                    }
                }
                projection.push(SelectItem::Wildcard);
            }
            SqlSelectItem::UnnamedExpr(e) => {
                let name = output_name(e);
                projection.push(SelectItem::Expr {
                    expr: expr::expr(e, &scope)?,
                    name,
                });
            }
            SqlSelectItem::ExprWithAlias { expr: e, alias } => {
                projection.push(SelectItem::Expr {
                    expr: expr::expr(e, &scope)?,
                    name: ident(alias),
                });
            }
            SqlSelectItem::ExprWithAliases { .. } => {
                return unsupported(format!("the select item `{item}`"));
            }
        }
    }
    if from.is_none() && projection.contains(&SelectItem::Wildcard) {
        return Err(QueryError::Translate(
            "SELECT * needs a FROM table".to_owned(),
        ));
    }
    let group_by = match &s.group_by {
        SqlGroupByExpr::Expressions(exprs, modifiers) => {
            if !modifiers.is_empty() {
                return unsupported("a GROUP BY modifier (ROLLUP, CUBE, ...)");
            }
            exprs
                .iter()
                .map(|e| expr::expr(e, &scope))
                .collect::<Result<Vec<_>>>()?
        }
        SqlGroupByExpr::All(_) => return unsupported("GROUP BY ALL"),
    };
    let filter = s
        .selection
        .as_ref()
        .map(|e| expr::expr(e, &scope))
        .transpose()?;
    if filter.as_ref().is_some_and(Expr::has_aggregate) {
        return Err(QueryError::Translate(
            "aggregate functions are not allowed in WHERE".to_owned(),
        ));
    }
    if group_by.iter().any(Expr::has_aggregate) {
        return Err(QueryError::Translate(
            "aggregate functions are not allowed in GROUP BY".to_owned(),
        ));
    }
    let having = s
        .having
        .as_ref()
        .map(|e| expr::expr(e, &scope))
        .transpose()?;
    Ok((
        Select {
            projection,
            from,
            filter,
            group_by,
            having,
            order_by: Vec::new(),
            limit: None,
            offset: 0,
            memo: PlanMemo::default(),
        },
        scope,
    ))
}

/// The output column name of an unnamed select item, as PostgreSQL names it: a column by its
/// name, a function call by the function's name in lower case (`count(*)` is `count`), a
/// parenthesised expression by what is inside, anything else `?column?`. Clients such as pandas rely on these names.
fn output_name(e: &SqlExpr) -> String {
    match e {
        SqlExpr::Identifier(i) => ident(i),
        SqlExpr::CompoundIdentifier(p) => p.last().map(ident).unwrap_or_default(),
        // The name's value, not its SQL text: `"count"(*)` is `count`, not `"count"`.
        SqlExpr::Function(f) => match f.name.0.last() {
            Some(SqlObjectNamePart::Identifier(i)) => ident(i).to_lowercase(),
            Some(part) => part.to_string().to_lowercase(),
            None => "?column?".to_owned(),
        },
        SqlExpr::Nested(inner) => output_name(inner),
        _ => "?column?".to_owned(),
    }
}

#[cfg(test)]
mod tests;
