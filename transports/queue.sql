-- The lease-based queue: every statement of RqliteTransport and SqliteTransport, sync and
-- async. Times (:now, :expiry) are always parameters, never SQL's clock: rqlite 8.26 does
-- not rewrite time functions, so each replica would evaluate them differently.
--
-- Deviation from the spec (same semantics, cheaper): `groups.ready_at` caches when a
-- group can next be claimed -- its head message's lease/park deadline while one is held,
-- else its last claim time -- kept exact by the queue's triggers (the schema is in
-- transports/db/migrations/). The claim then walks one
-- index instead of the spec's NOT IN over every in-flight message and a join sort, so its
-- cost does not grow with the number of queued messages. A lapsed or due group is ordered
-- by its deadline instead of its last claim time.

-- name: fragment.ready_groups
-- Claimable groups at or above the priority floor, oldest ready_at first. One indexed
-- range per priority (0-4) instead of a filter, so a floor never scans the groups below it.
SELECT group_id, ready_at FROM (
  SELECT group_id, ready_at FROM (SELECT group_id, ready_at FROM groups
    WHERE priority = 4 AND ready_at <= :now ORDER BY ready_at LIMIT :limit)
  UNION ALL SELECT group_id, ready_at FROM (SELECT group_id, ready_at FROM groups
    WHERE priority = 3 AND :min_priority <= 3 AND ready_at <= :now ORDER BY ready_at LIMIT :limit)
  UNION ALL SELECT group_id, ready_at FROM (SELECT group_id, ready_at FROM groups
    WHERE priority = 2 AND :min_priority <= 2 AND ready_at <= :now ORDER BY ready_at LIMIT :limit)
  UNION ALL SELECT group_id, ready_at FROM (SELECT group_id, ready_at FROM groups
    WHERE priority = 1 AND :min_priority <= 1 AND ready_at <= :now ORDER BY ready_at LIMIT :limit)
  UNION ALL SELECT group_id, ready_at FROM (SELECT group_id, ready_at FROM groups
    WHERE priority = 0 AND :min_priority <= 0 AND ready_at <= :now ORDER BY ready_at LIMIT :limit)
)

-- name: fragment.served_groups
-- `ready_groups` of the lanes in :lanes (a JSON array) only: one indexed range per lane and
-- priority, so the cost follows the lanes a worker serves, not what else waits. CROSS JOIN
-- fixes the join order (the planner would otherwise scan groups for small tables).
SELECT g.group_id, g.ready_at
FROM json_each(:lanes) AS l CROSS JOIN json_each('[4, 3, 2, 1, 0]') AS p
     CROSS JOIN groups AS g
WHERE p.value >= :min_priority AND g.rowid IN (
  SELECT rowid FROM groups WHERE lane = l.value AND priority = p.value AND ready_at <= :now
  ORDER BY ready_at LIMIT :limit)

-- name: publish
-- Idempotent: a retry of a publish whose first attempt was applied finds its key.
INSERT INTO messages (group_id, event, priority, published_at, dedup_key, lane)
SELECT :group_id, :event, :priority, :now, :key, :lane
WHERE NOT EXISTS (SELECT 1 FROM message_keys WHERE key = :key);

-- name: forget_keys
DELETE FROM message_keys WHERE published_at < :cutoff;

-- name: fragment.lease_heads
-- The race-free lease: Raft (or SQLite's write lock) serializes this single statement, so
-- no two workers can lease the same group. Takes the head of up to :limit of the groups
-- that follow (the statements below name them and close the parentheses).
UPDATE messages SET locked_by = :token, lock_expiry = :expiry, attempts = attempts + 1
WHERE seq IN (
  SELECT head FROM (
    SELECT ready.ready_at,
           (SELECT MIN(m.seq) FROM messages AS m WHERE m.group_id = ready.group_id) AS head
    FROM

-- name: claim
{{fragment.lease_heads}} ({{fragment.ready_groups}}) AS ready)
  ORDER BY ready_at, head LIMIT :limit);

-- name: claim_served
-- A worker's claim: only the groups of the lanes it serves.
{{fragment.lease_heads}} ({{fragment.served_groups}}) AS ready)
  ORDER BY ready_at, head LIMIT :limit);

-- name: touch_claimed_groups
UPDATE groups SET last_claimed_at = :now
WHERE group_id IN (SELECT group_id FROM messages WHERE locked_by = :token);

-- name: claimed
SELECT seq, group_id, event, attempts, lock_expiry FROM messages
WHERE locked_by = :token ORDER BY seq;

-- name: claimable
SELECT COUNT(*) AS ready FROM ({{fragment.ready_groups}});

-- name: claimable_served
SELECT COUNT(*) AS ready FROM ({{fragment.served_groups}});

-- name: ack
DELETE FROM messages WHERE seq = :seq AND locked_by = :token;

-- name: nack
-- delay > 0 parks (:locked_by '__parked__' until :expiry); delay 0 frees it (NULL, 0).
UPDATE messages SET locked_by = :locked_by, lock_expiry = :expiry
WHERE seq = :seq AND locked_by = :token;

-- name: extend
UPDATE messages SET lock_expiry = :expiry WHERE seq = :seq AND locked_by = :token;

-- name: release_group
-- The engine's hand-back when it cannot tell whether its commit applied: whatever message of
-- the group its token holds (the current one, or the next one the commit leased to it),
-- free (:locked_by NULL) or parked for a back-off (:locked_by '__parked__').
UPDATE messages SET locked_by = :locked_by, lock_expiry = :expiry
WHERE group_id = :group_id AND locked_by = :token;

-- name: holder
SELECT locked_by, lock_expiry FROM messages WHERE seq = :seq;

-- name: clock
SELECT (julianday('now') - 2440587.5) * 86400.0 AS now;

-- name: stats
SELECT
  COUNT(*) AS messages,
  COALESCE(SUM(locked_by IS NOT NULL AND locked_by <> '__parked__'), 0) AS leased,
  COALESCE(SUM(locked_by = '__parked__'), 0) AS parked,
  (SELECT COUNT(*) FROM groups) AS groups
FROM messages;

-- name: idle_state
-- What is in flight (engine.testing's idle check): leases held, and the earliest parked
-- deadline.
SELECT (SELECT COUNT(*) FROM messages
        WHERE locked_by IS NOT NULL AND locked_by <> '__parked__') AS leased,
       (SELECT MIN(lock_expiry) FROM messages WHERE locked_by = '__parked__') AS next_at;
