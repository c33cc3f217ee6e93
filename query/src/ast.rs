//! Our own small SQL AST: exactly the supported subset. [`crate::translate`] builds it from
//! sqlparser's AST; the planner and executor only ever see these types.
//!
//! Identifiers are case-folded by translation: unquoted names are lowercased, quoted names
//! are kept as written.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::plan::PlanMemo;
use crate::value::{DataType, Value};

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `CREATE TABLE [IF NOT EXISTS] name (columns..., PRIMARY KEY (...))`.
    CreateTable {
        /// Table name.
        name: String,
        /// Columns in declaration order.
        columns: Vec<ColumnDef>,
        /// Primary-key column names, in key order; empty when none was declared (refused when
        /// the statement runs, unless `if_not_exists` finds the table).
        primary_key: Vec<String>,
        /// Succeed without doing anything when the table exists.
        if_not_exists: bool,
    },
    /// `DROP TABLE [IF EXISTS] name`.
    DropTable {
        /// Table name.
        name: String,
        /// Succeed when the table does not exist.
        if_exists: bool,
    },
    /// `CREATE INDEX [IF NOT EXISTS] name ON table (column)`.
    CreateIndex {
        /// Index name.
        name: String,
        /// Table name.
        table: String,
        /// Indexed column.
        column: String,
        /// Succeed without doing anything when an index of that name exists.
        if_not_exists: bool,
    },
    /// `DROP INDEX [IF EXISTS] name`.
    DropIndex {
        /// Index name.
        name: String,
        /// Succeed when the index does not exist.
        if_exists: bool,
    },
    /// `SHOW TABLES`.
    ShowTables,
    /// `DESCRIBE name`.
    Describe {
        /// Table name.
        table: String,
    },
    /// `INSERT [OR REPLACE | OR IGNORE] INTO t [(cols)] VALUES ... [ON CONFLICT DO NOTHING]`.
    Insert(Insert),
    /// `SELECT ...`.
    Select(Box<Select>),
    /// `UPDATE t SET c = e, ... [WHERE ...]`.
    Update {
        /// Table name.
        table: String,
        /// `(column, new value)` pairs.
        assignments: Vec<(String, Expr)>,
        /// Rows to change; all when `None`.
        filter: Option<Expr>,
    },
    /// `DELETE FROM t [WHERE ...]`.
    Delete {
        /// Table name.
        table: String,
        /// Rows to delete; all when `None`.
        filter: Option<Expr>,
    },
    /// `EXPLAIN statement`: the plan, not the result.
    Explain(Box<Statement>),
}

/// A column in `CREATE TABLE`.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    /// Column name.
    pub name: String,
    /// Column type.
    pub ty: DataType,
    /// `NOT NULL` was given.
    pub not_null: bool,
}

/// What INSERT does when a row's primary key already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// Fail the statement (the default).
    Error,
    /// Keep the existing row and skip the new one (`INSERT OR IGNORE`, `ON CONFLICT DO NOTHING`).
    DoNothing,
    /// Replace the existing row (`INSERT OR REPLACE`, `REPLACE INTO`).
    Replace,
}

/// An INSERT.
#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    /// Table name.
    pub table: String,
    /// Target columns; all columns in order when `None`.
    pub columns: Option<Vec<String>>,
    /// The VALUES rows.
    pub rows: Vec<Vec<Expr>>,
    /// Duplicate-key behaviour.
    pub on_conflict: OnConflict,
    /// The columns of `ON CONFLICT (cols)`, which must be the primary key's (the only unique
    /// constraint a table has); `None` without a target.
    pub conflict_target: Option<Vec<String>>,
}

/// A SELECT.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// Output columns.
    pub projection: Vec<SelectItem>,
    /// The table; `None` for `SELECT 1 + 1`.
    pub from: Option<String>,
    /// WHERE.
    pub filter: Option<Expr>,
    /// GROUP BY expressions.
    pub group_by: Vec<Expr>,
    /// HAVING.
    pub having: Option<Expr>,
    /// ORDER BY keys.
    pub order_by: Vec<OrderItem>,
    /// LIMIT.
    pub limit: Option<u64>,
    /// OFFSET (0 when absent).
    pub offset: u64,
    /// The plan last made for this SELECT and the catalog it was made against, reused while
    /// that catalog is current ([`crate::plan::plan_select_memo`]).
    pub memo: PlanMemo,
}

/// One item of the select list.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `*`: every column of the table.
    Wildcard,
    /// An expression and its output column name (the alias, or the expression's text).
    Expr {
        /// The expression.
        expr: Expr,
        /// The output column name.
        name: String,
    },
}

/// One ORDER BY key.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderItem {
    /// What to sort by.
    pub key: OrderKey,
    /// Descending.
    pub desc: bool,
}

/// An ORDER BY key.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderKey {
    /// `ORDER BY 2`: the 1-based output column.
    Ordinal(usize),
    /// `ORDER BY name`, a bare name: the output column of that name if there is one (it wins
    /// over a table column of the same name, as in PostgreSQL and SQLite), else the table
    /// column.
    Name(String),
    /// Any other expression, over the table's columns (a qualified `t.name` is always the
    /// table's column).
    Expr(Expr),
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `||` (text concatenation)
    Concat,
    /// `=`
    Eq,
    /// `<>`, `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND`
    And,
    /// `OR`
    Or,
}

impl BinaryOp {
    /// Whether this is `=`, `<>`, `<`, `<=`, `>` or `>=` (a BOOLEAN, or NULL, from two values
    /// of comparable types).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq
                | BinaryOp::NotEq
                | BinaryOp::Lt
                | BinaryOp::LtEq
                | BinaryOp::Gt
                | BinaryOp::GtEq
        )
    }

    /// The SQL spelling.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Concat => "||",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "<>",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
        }
    }

    /// The comparison with its operands swapped (`a < b` ⇔ `b > a`); other operators unchanged.
    pub fn flip(self) -> BinaryOp {
        match self {
            BinaryOp::Lt => BinaryOp::Gt,
            BinaryOp::LtEq => BinaryOp::GtEq,
            BinaryOp::Gt => BinaryOp::Lt,
            BinaryOp::GtEq => BinaryOp::LtEq,
            op => op,
        }
    }
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `NOT`
    Not,
    /// `-`
    Neg,
}

/// Scalar functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarFunc {
    /// `LENGTH(text|blob)`: characters of text, bytes of a blob.
    Length,
    /// `UPPER(text)`.
    Upper,
    /// `LOWER(text)`.
    Lower,
    /// `ABS(number)`.
    Abs,
    /// `COALESCE(a, b, ...)`: the first non-NULL argument.
    Coalesce,
    /// `CAST(x AS DOUBLE)` of a BIGINT (NULL stays NULL). Not written in SQL: the planner puts
    /// it around the BIGINT arguments of a COALESCE that also has DOUBLE ones, so every value
    /// of the result is a DOUBLE, as in PostgreSQL.
    ToDouble,
}

impl ScalarFunc {
    /// The SQL name.
    pub fn name(self) -> &'static str {
        match self {
            ScalarFunc::Length => "length",
            ScalarFunc::Upper => "upper",
            ScalarFunc::Lower => "lower",
            ScalarFunc::Abs => "abs",
            ScalarFunc::Coalesce => "coalesce",
            ScalarFunc::ToDouble => "double",
        }
    }
}

/// Aggregate functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    /// `COUNT(*)` (with no argument) or `COUNT(e)` (non-NULL values).
    Count,
    /// `SUM(e)`: NULL over no non-NULL values.
    Sum,
    /// `MIN(e)`.
    Min,
    /// `MAX(e)`.
    Max,
    /// `AVG(e)`: a DOUBLE.
    Avg,
}

impl AggFunc {
    /// The SQL name.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::Avg => "avg",
        }
    }
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant.
    Literal(Value),
    /// A column by name (before binding).
    Column(String),
    /// A column by position in the row (after binding; see `plan`).
    Field(usize),
    /// `op expr`.
    Unary {
        /// Operator.
        op: UnaryOp,
        /// Operand.
        expr: Box<Expr>,
    },
    /// `left op right`.
    Binary {
        /// Operator.
        op: BinaryOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
    },
    /// `expr IS [NOT] NULL`.
    IsNull {
        /// Operand.
        expr: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `expr [NOT] BETWEEN low AND high`.
    Between {
        /// Operand.
        expr: Box<Expr>,
        /// Lower bound (inclusive).
        low: Box<Expr>,
        /// Upper bound (inclusive).
        high: Box<Expr>,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `expr [NOT] IN (list)`; build it with [`Expr::in_list`].
    InList {
        /// Operand.
        expr: Box<Expr>,
        /// Candidates.
        list: Vec<Expr>,
        /// `NOT IN`.
        negated: bool,
        /// The candidates sorted for binary search, when they are all literals and many
        /// (derived from `list`).
        lookup: Option<InLookup>,
    },
    /// `expr [NOT] LIKE pattern` (`%` any run, `_` one character; case-sensitive).
    Like {
        /// Operand.
        expr: Box<Expr>,
        /// Pattern.
        pattern: Box<Expr>,
        /// `NOT LIKE`.
        negated: bool,
    },
    /// A scalar function call.
    Function {
        /// Function.
        func: ScalarFunc,
        /// Arguments.
        args: Vec<Expr>,
    },
    /// An aggregate call; `arg` is `None` for `COUNT(*)`.
    Aggregate {
        /// Function.
        func: AggFunc,
        /// Argument.
        arg: Option<Box<Expr>>,
    },
}

/// The literal candidates of a long `IN` list, sorted by [`Value::total_cmp`] without
/// duplicates or NULLs, so that a row's value is looked up in O(log n) comparisons instead of
/// compared with each (a 30,000-value list over 200,000 rows took 151 s).
#[derive(Debug, Clone, PartialEq)]
pub struct InLookup {
    values: Arc<[Value]>,
    has_null: bool,
}

impl InLookup {
    /// Lists shorter than this are compared one by one.
    const MIN_LEN: usize = 8;

    /// The lookup for `list`, or `None` when it is short or holds anything but literals.
    fn new(list: &[Expr]) -> Option<InLookup> {
        if list.len() < Self::MIN_LEN {
            return None;
        }
        let mut values = Vec::with_capacity(list.len());
        let mut has_null = false;
        for item in list {
            match item {
                Expr::Literal(Value::Null) => has_null = true,
                Expr::Literal(v) => values.push(v.clone()),
                _ => return None,
            }
        }
        values.sort_by(Value::total_cmp);
        values.dedup_by(|a, b| a.total_cmp(b) == Ordering::Equal);
        Some(InLookup {
            values: values.into(),
            has_null,
        })
    }

    /// SQL's `v IN (list)` for a non-NULL `v` of a type the planner found comparable with the
    /// candidates: true when one equals it, else NULL when the list holds a NULL, else false.
    pub fn contains(&self, v: &Value) -> Option<bool> {
        if self
            .values
            .binary_search_by(|candidate| candidate.total_cmp(v))
            .is_ok()
        {
            Some(true)
        } else if self.has_null {
            None
        } else {
            Some(false)
        }
    }
}

impl Expr {
    /// `expr [NOT] IN (list)`, with the sorted lookup when the list is long and literal.
    pub fn in_list(expr: Box<Expr>, list: Vec<Expr>, negated: bool) -> Expr {
        Expr::InList {
            expr,
            lookup: InLookup::new(&list),
            list,
            negated,
        }
    }

    /// Calls `f` on this expression and every sub-expression, parents first.
    pub fn walk(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Literal(_) | Expr::Column(_) | Expr::Field(_) => {}
            Expr::Unary { expr, .. } | Expr::IsNull { expr, .. } => expr.walk(f),
            Expr::Binary { left, right, .. } => {
                left.walk(f);
                right.walk(f);
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                expr.walk(f);
                low.walk(f);
                high.walk(f);
            }
            Expr::InList { expr, list, .. } => {
                expr.walk(f);
                list.iter().for_each(|e| e.walk(f));
            }
            Expr::Like { expr, pattern, .. } => {
                expr.walk(f);
                pattern.walk(f);
            }
            Expr::Function { args, .. } => args.iter().for_each(|e| e.walk(f)),
            Expr::Aggregate { arg, .. } => {
                if let Some(a) = arg {
                    a.walk(f);
                }
            }
        }
    }

    /// True when the expression contains an aggregate call.
    pub fn has_aggregate(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| found |= matches!(e, Expr::Aggregate { .. }));
        found
    }
}
