use super::*;
use crate::parse::parse;
use crate::value::DataType;

fn tr(sql: &str) -> Result<Statement> {
    statement(&parse(sql)?[0])
}

fn err(sql: &str) -> String {
    tr(sql).unwrap_err().to_string()
}

#[test]
fn unsupported_constructs_are_named() {
    assert_eq!(
        err("SELECT * FROM a JOIN b ON a.x = b.x"),
        "JOIN is not supported"
    );
    assert_eq!(err("SELECT * FROM a, b"), "JOIN is not supported");
    assert_eq!(
        err("SELECT DISTINCT x FROM a"),
        "SELECT DISTINCT is not supported"
    );
    assert_eq!(
        err("SELECT x FROM a UNION SELECT x FROM b"),
        "UNION is not supported"
    );
    assert_eq!(
        err("WITH c AS (SELECT 1) SELECT * FROM c"),
        "WITH (common table expressions) is not supported"
    );
    assert_eq!(err("SELECT (SELECT 1)"), "a subquery is not supported");
    assert_eq!(
        err("SELECT CASE WHEN 1 THEN 2 END"),
        "CASE is not supported"
    );
    assert_eq!(
        err("CREATE TABLE t (a INT PRIMARY KEY, b INT UNIQUE)"),
        "a UNIQUE constraint is not supported"
    );
    assert_eq!(
        err("CREATE TABLE t (a DATE PRIMARY KEY)"),
        "the type DATE is not supported"
    );
    assert_eq!(err("SELECT foo(1)"), "the function FOO() is not supported");
    assert_eq!(
        err("INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2"),
        "ON CONFLICT DO UPDATE is not supported"
    );
    assert_eq!(
        err("BEGIN"),
        "a transaction (each statement is atomic on its own) is not supported"
    );
    assert_eq!(
        err("SELECT * FROM t WHERE a = $1"),
        "a parameter ($1, ?) is not supported"
    );
}

#[test]
fn syntax_errors_show_the_position() {
    assert_eq!(
        err("SELECT * FROM t WHERE"),
        "syntax error: Expected: an expression, found: EOF at the end of the input"
    );
    assert_eq!(
        err("SELECT * FRM t"),
        "syntax error: Expected: end of statement, found: FRM at Line: 1, Column: 10"
    );
}

#[test]
fn postgresql_type_names_are_accepted() {
    let Statement::CreateTable { columns, .. } = tr(
        "CREATE TABLE t (a int8 PRIMARY KEY, b int4, c smallint, d float8, e float4, \
         f character varying(10))",
    )
    .expect("create table") else {
        panic!("not a CREATE TABLE");
    };
    let types: Vec<DataType> = columns.iter().map(|c| c.ty).collect();
    assert_eq!(
        types,
        [
            DataType::BigInt,
            DataType::BigInt,
            DataType::BigInt,
            DataType::Double,
            DataType::Double,
            DataType::Text
        ]
    );
}

#[test]
fn create_table_requires_exactly_one_primary_key() {
    assert_eq!(
        err("CREATE TABLE t (a INT PRIMARY KEY, b INT, PRIMARY KEY (b))"),
        "table t has more than one PRIMARY KEY"
    );
    let s = tr("CREATE TABLE IF NOT EXISTS Reads (Seq VARCHAR(200) NOT NULL, \"Count\" BIGINT, PRIMARY KEY (seq))").unwrap();
    let Statement::CreateTable {
        name,
        columns,
        primary_key,
        if_not_exists,
    } = s
    else {
        panic!()
    };
    assert_eq!(name, "reads");
    assert_eq!(columns[1].name, "Count");
    assert_eq!(primary_key, vec!["seq".to_owned()]);
    assert!(if_not_exists && columns[0].not_null);
}

#[test]
fn insert_forms_map_to_conflict_modes() {
    let mode = |sql: &str| match tr(sql).unwrap() {
        Statement::Insert(i) => i.on_conflict,
        _ => panic!(),
    };
    assert_eq!(mode("INSERT INTO t VALUES (1)"), OnConflict::Error);
    assert_eq!(
        mode("INSERT OR REPLACE INTO t VALUES (1)"),
        OnConflict::Replace
    );
    assert_eq!(mode("REPLACE INTO t VALUES (1)"), OnConflict::Replace);
    assert_eq!(
        mode("INSERT OR IGNORE INTO t VALUES (1)"),
        OnConflict::DoNothing
    );
    assert_eq!(
        mode("INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING"),
        OnConflict::DoNothing
    );
    assert_eq!(
        err("INSERT INTO t (a, b) VALUES (1)"),
        "VALUES row 1 has 1 values but 2 columns were named"
    );
}

#[test]
fn select_parts_are_translated() {
    let Statement::Select(s) = tr("SELECT seq, count AS n FROM reads r WHERE r.count > -10 ORDER BY 2 DESC, seq LIMIT 20 OFFSET 5").unwrap() else { panic!() };
    assert_eq!(s.from.as_deref(), Some("reads"));
    assert_eq!(s.limit, Some(20));
    assert_eq!(s.offset, 5);
    assert_eq!(
        s.order_by[0],
        OrderItem {
            key: OrderKey::Ordinal(2),
            desc: true
        }
    );
    assert!(matches!(&s.projection[1], SelectItem::Expr { name, .. } if name == "n"));
    assert_eq!(
        err("SELECT x.seq FROM reads"),
        "unknown table x in a column reference"
    );
    assert_eq!(
        err("SELECT * FROM t LIMIT -1"),
        "LIMIT must be a non-negative integer"
    );
}

#[test]
fn unnamed_select_items_are_named_as_postgresql_names_them() {
    let Statement::Select(s) =
        tr(r#"SELECT r.seq, count(*), AVG(count), (count), count + 1, "max"(count) FROM reads r"#)
            .unwrap()
    else {
        panic!()
    };
    let names: Vec<&str> = s
        .projection
        .iter()
        .map(|p| match p {
            SelectItem::Expr { name, .. } => name.as_str(),
            SelectItem::Wildcard => "*",
        })
        .collect();
    // A quoted function name gives its value, not its quoted text.
    assert_eq!(names, ["seq", "count", "avg", "count", "?column?", "max"]);
}
