-- Migration 17: the partition fence and deployment ids -- what keeps a sharded deployment's
-- executions on the clusters its catalog names.
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
-- Each cluster's identity also gets its deployment's id (a random one, drawn by the
-- process that creates the deployment): clusters were told apart by their names only, and
-- every deployment names its first cluster `shard-1`, so a URL that listed one
-- deployment's catalog with another deployment's second cluster was taken for one
-- deployment, and partitions routed to a cluster that was not theirs. A deployment created
-- before this migration has no id (NULL): its clusters are still told apart by name only.
--
-- Rolling upgrade: workers of version 16 keep running beside version 17 (a new table, a
-- view and a column, which they neither read nor write); their starts are not fenced.

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

-- name: shard_identity.deployment
ALTER TABLE shard_identity ADD COLUMN deployment TEXT;
