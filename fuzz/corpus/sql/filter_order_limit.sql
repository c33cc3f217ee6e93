SELECT name, score * 2 + 1 AS x FROM t WHERE score > 0 ORDER BY x DESC LIMIT 2 OFFSET 0
