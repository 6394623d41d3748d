-- The partition fence of a sharded deployment (stores/placement.py; the table, the view
-- and its trigger: transports/db/migrations/0017_partition_fence.sql). Times are
-- parameters (transports/queue.sql).

-- name: partition_fence
-- In a sharded start's transaction, first: aborts it if the partition has left this cluster.
INSERT INTO partition_fence (partition) VALUES (:partition);

-- name: moved_away
-- :partitions is a JSON array.
INSERT INTO moved_partitions (partition, cluster, epoch, moved_at)
SELECT value, :cluster, :epoch, :now FROM json_each(:partitions) WHERE true
ON CONFLICT (partition) DO UPDATE SET
  cluster = excluded.cluster, epoch = excluded.epoch, moved_at = excluded.moved_at;

-- name: arrived
DELETE FROM moved_partitions WHERE partition IN (SELECT value FROM json_each(:partitions));
