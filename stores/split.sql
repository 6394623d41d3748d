-- A store on another database than its transport (stores/split.py). The store's own
-- `messages` table is then its outbox and the mirror of its transport's leases: the fenced
-- commit, the wake-ups and the parks work on it unchanged (transports/db/schema.sql), and
-- what the store publishes reaches the transport through `due`. Mirrors have negative seqs
-- (minus the transport's seq), so they never meet the rows the store's triggers publish.
-- Times are parameters (transports/queue.sql).

-- name: supersede
-- A new lease of the group's event revokes every older mirror of the group: a worker that
-- held it before (its lease lapsed) is fenced from here on, as a stolen lease fences it.
DELETE FROM messages WHERE group_id = :group_id AND seq < 0;

-- name: mirror
-- The transport's lease, as the store's commits check it (by seq and token).
INSERT INTO messages (seq, group_id, event, priority, published_at, locked_by, lock_expiry,
                      attempts)
VALUES (:seq, :group_id, :event, :priority, :now, :token, :expiry, :attempts);

-- name: due
-- What the store published for the transport: free events, and parked ones whose time has
-- come (a park stays here until then, so a signal or a cancel can still wake it early).
-- The lane is the execution's when the event's own is unset (a commit's next event).
SELECT m.seq, m.group_id, m.event, m.priority, m.published_at,
       COALESCE(m.lane, (SELECT e.lane FROM executions AS e WHERE e.id = m.group_id)) AS lane
FROM messages AS m
WHERE m.seq > 0
  AND (m.locked_by IS NULL OR (m.locked_by = '__parked__' AND m.lock_expiry <= :now))
ORDER BY m.seq LIMIT :limit;

-- name: forget
-- The events the transport now holds (a park pushed back meanwhile stays).
DELETE FROM messages
WHERE seq IN (SELECT value FROM json_each(:seqs))
  AND (locked_by IS NULL OR (locked_by = '__parked__' AND lock_expiry <= :now));

-- name: drop_finished
-- After the claim's reads: the mirrors of events of finished executions, which no commit
-- will settle (the worker only acks them in the queue).
DELETE FROM messages
WHERE locked_by = :token AND seq < 0
  AND group_id IN (SELECT id FROM executions
                   WHERE status IN ('succeeded', 'failed', 'cancelled', 'continued'));
