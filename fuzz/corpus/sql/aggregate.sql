SELECT name, count(*), sum(score), avg(score), min(id), max(id) FROM t GROUP BY name HAVING count(*) >= 1 ORDER BY 2
