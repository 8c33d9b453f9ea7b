-- A served request's trajectory row carries ~32 KB of JSON steps, which PostgreSQL compresses when it
-- stores the row (TOAST). Its default, pglz, was most of what the recorder cost the server: on 400 rows
-- of a benchmark run (benchmarks/bench_throughput.py), storing a row took 0.66 ms of the server's CPU
-- with pglz and 0.22 ms with lz4, and 14.5 KB on disk against 8.4 KB. Rows stored before keep pglz
-- (PostgreSQL reads both). A server without lz4 support (older than 14, or built without it) keeps
-- pglz: the statements run dynamically, so that refusal is caught instead of failing the migration.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE trajectories ALTER COLUMN steps SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE trajectories ALTER COLUMN comments SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'trajectories keep pglz compression: %', SQLERRM;
END
$$;
