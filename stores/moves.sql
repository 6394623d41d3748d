-- Moving partitions of a sharded deployment between clusters (stores/moves.py): the rows
-- of a batch of queue groups read on the cluster they leave, written on the one they go
-- to (idempotent: a move run again after a crash writes nothing twice), deleted where
-- they were once the catalog points elsewhere. :ids is a JSON array of queue group ids
-- (an execution's is its id); :keys one of rate-limit keys.

-- name: groups
-- Every queue group of the cluster: executions, and groups without one (cron schedules).
SELECT id FROM executions UNION SELECT group_id FROM messages;

-- name: rate_keys
SELECT DISTINCT key FROM rate_slots;

-- name: live_leases
-- Messages of the batch that a worker holds now: a move needs the workers stopped.
SELECT group_id, locked_by FROM messages
WHERE group_id IN (SELECT value FROM json_each(:ids))
  AND locked_by IS NOT NULL AND locked_by <> '__parked__' AND lock_expiry > :now;

-- name: read.executions
SELECT * FROM executions WHERE id IN (SELECT value FROM json_each(:ids));
-- name: read.steps
SELECT * FROM steps WHERE execution_id IN (SELECT value FROM json_each(:ids));
-- name: read.events
SELECT * FROM events WHERE execution_id IN (SELECT value FROM json_each(:ids));
-- name: read.streams
SELECT * FROM streams WHERE execution_id IN (SELECT value FROM json_each(:ids));
-- name: read.remote_children
SELECT * FROM remote_children WHERE parent_id IN (SELECT value FROM json_each(:ids));
-- name: read.outbox
SELECT target, kind, source, payload, created_at FROM outbox
WHERE source IN (SELECT value FROM json_each(:ids)) ORDER BY seq;
-- name: read.signals
SELECT execution_id, topic, payload, key, sent_at, consumed_idx, consumed_at FROM signals
WHERE execution_id IN (SELECT value FROM json_each(:ids)) ORDER BY seq;
-- name: read.messages
SELECT group_id, event, locked_by, lock_expiry, priority, published_at, attempts, dedup_key,
       lane
FROM messages WHERE group_id IN (SELECT value FROM json_each(:ids)) ORDER BY seq;
-- name: read.message_keys
SELECT * FROM message_keys WHERE key IN (
  SELECT dedup_key FROM messages WHERE group_id IN (SELECT value FROM json_each(:ids)));
-- name: read.rate_slots
SELECT * FROM rate_slots WHERE key IN (SELECT value FROM json_each(:keys));

-- name: copied_groups
-- Groups of the batch whose messages the cluster they go to has already (a move run again).
SELECT DISTINCT group_id FROM messages WHERE group_id IN (SELECT value FROM json_each(:ids));

-- name: delete.steps
DELETE FROM steps WHERE execution_id IN (SELECT value FROM json_each(:ids));
-- name: delete.events
DELETE FROM events WHERE execution_id IN (SELECT value FROM json_each(:ids));
-- name: delete.streams
DELETE FROM streams WHERE execution_id IN (SELECT value FROM json_each(:ids));
-- name: delete.signals
DELETE FROM signals WHERE execution_id IN (SELECT value FROM json_each(:ids));
-- name: delete.remote_children
DELETE FROM remote_children WHERE parent_id IN (SELECT value FROM json_each(:ids));
-- name: delete.outbox
DELETE FROM outbox WHERE source IN (SELECT value FROM json_each(:ids));
-- name: delete.message_keys
DELETE FROM message_keys WHERE key IN (
  SELECT dedup_key FROM messages WHERE group_id IN (SELECT value FROM json_each(:ids)));
-- name: delete.messages
DELETE FROM messages WHERE group_id IN (SELECT value FROM json_each(:ids));
-- name: delete.executions
DELETE FROM executions WHERE id IN (SELECT value FROM json_each(:ids));
-- name: delete.rate_slots
DELETE FROM rate_slots WHERE key IN (SELECT value FROM json_each(:keys));
