INSERT INTO t SELECT id + 100, name, score, flag FROM t; SELECT count(*) FROM t
