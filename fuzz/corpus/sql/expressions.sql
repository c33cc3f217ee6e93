SELECT 1 + 2 * 3, 7 / 2.0, 7 % 4, 'ab' || 'cd', length('ACGT'), abs(-4), coalesce(NULL, 5), -9223372036854775807 - 1, CAST(1 AS TEXT)
