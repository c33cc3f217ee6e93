SELECT "id", t.name FROM t AS x WHERE x.id = $1
