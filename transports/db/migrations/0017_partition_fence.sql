-- Migration 17: the partition fence -- a cluster refuses starts of partitions it gave away.
--
-- Why: a move of partitions (engine/shards/move.py) copies their executions to another
-- cluster, bumps the catalog and deletes them where they were. A process still routing
-- by the catalog it read before the move (one not restarted, or a start that arrives
-- during the copy) would start an execution on the old cluster: out of reach of every
-- process on the new catalog, or deleted by the move's clean-up. A move now first
-- records on each cluster losing partitions which ones leave (`moved_partitions`); a
-- sharded start carries its partition into the `partition_fence` view in the same
-- transaction, whose trigger aborts it when the partition has left this cluster. An
-- unsharded start writes nothing to the view: it pays nothing.
--
-- Rolling upgrade: workers of version 16 keep running beside version 17 (a new table
-- and a view, which they neither read nor write); their starts are not fenced.

-- name: moved_partitions
-- The partitions this cluster held and gave away: to ``cluster`` at catalog ``epoch``.
CREATE TABLE moved_partitions (
  partition  INTEGER PRIMARY KEY,
  cluster    TEXT NOT NULL,
  epoch      INTEGER NOT NULL,
  moved_at   REAL NOT NULL
);

-- name: partition_fence
-- Holds no rows: an insert is the check of the trigger below.
CREATE VIEW partition_fence AS SELECT NULL AS partition;

-- name: partition_fence_check
CREATE TRIGGER partition_fence_check INSTEAD OF INSERT ON partition_fence
WHEN EXISTS (SELECT 1 FROM moved_partitions WHERE partition = NEW.partition)
BEGIN
  SELECT RAISE(ABORT, 'raftflow: partition moved');
END;
