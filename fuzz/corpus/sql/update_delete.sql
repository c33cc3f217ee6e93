UPDATE t SET id = id + 10, name = upper(lower(name)) || 'x' WHERE id < 3; DELETE FROM t WHERE flag IS NULL RETURNING id
