-- Migration 7: transaction steps (@engine.transaction) -- a step's own SQL commits in the
-- same request (one rqlite transaction, one Raft entry) as its checkpoint.
--
-- The guards of such a request (stores/store.sql `transaction_*`) abort the whole
-- transaction when their condition fails by inserting a NULL here: the NOT NULL
-- constraint fails, rqlite (or SQLite) rolls every statement of the request back, the
-- user's writes with it. The table therefore never holds a row.
--
-- Rolling upgrade: expand only (a new table). Workers of version 6 keep working.

-- name: transaction_checks.table
CREATE TABLE IF NOT EXISTS transaction_checks (failed INTEGER NOT NULL);
