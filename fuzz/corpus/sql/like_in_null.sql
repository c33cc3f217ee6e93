SELECT * FROM t WHERE name LIKE 'AC_T%' OR name IN ('TTGA', 'X') OR name IS NULL
