-- A sharded deployment's identities and catalog (stores/catalog.py; the tables:
-- transports/db/migrations/0014_shards.sql). Times are parameters (transports/queue.sql).

-- name: identity
SELECT name, catalog, deployment FROM shard_identity WHERE id = 1;

-- name: claim_identity
-- Written once: a cluster that has a name keeps it (a second deployment's claim changes
-- nothing, and the read that follows shows the name it has).
INSERT INTO shard_identity (id, name, catalog, deployment, created_at)
VALUES (1, :name, :catalog, :deployment, :now) ON CONFLICT (id) DO NOTHING;

-- name: catalog
SELECT partitions, epoch, assignment FROM shard_catalog WHERE id = 1;

-- name: create_catalog
-- Written once, by the first process that opens the deployment; the others read it.
INSERT INTO shard_catalog (id, partitions, epoch, assignment, created_at, updated_at)
VALUES (1, :partitions, 1, :assignment, :now, :now) ON CONFLICT (id) DO NOTHING;

-- name: reassign
-- A new assignment, only over the epoch it was computed from (compare and set).
UPDATE shard_catalog SET assignment = :assignment, epoch = epoch + 1, updated_at = :now
WHERE id = 1 AND epoch = :epoch;

-- name: any_execution
-- Whether the cluster holds an execution (a new deployment starts from empty clusters).
SELECT 1 AS found FROM executions LIMIT 1;
