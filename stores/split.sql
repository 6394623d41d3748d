-- A store on another database than its transport (stores/split.py). The store's own
-- `messages` table is then its outbox and the mirror of its transport's leases: the fenced
-- commit, the wake-ups and the parks work on it unchanged (transports/db/schema.sql), and
-- what the store publishes reaches the transport through `due`. Mirrors have negative seqs
-- (minus the transport's seq), so they never meet the rows the store's triggers publish.
-- Times are parameters (transports/queue.sql).

-- name: supersede
-- A later lease of the group's events revokes the older mirrors of the group: a worker
-- that held one before (its lease lapsed) is fenced from here on, as a stolen lease fences
-- it. Later by the transport's order of delivery: a later message (seq), or the same one
-- claimed again (attempts). A claim's request that arrives late, after a later claim's,
-- so revokes nothing.
DELETE FROM messages
WHERE group_id = :group_id AND seq < 0
  AND (-seq < :queued OR (-seq = :queued AND attempts < :attempts));

-- name: mirror
-- The transport's lease, as the store's commits check it (by seq and token), unless a
-- mirror as late or later is there (a late request's) or the execution is finished (no
-- commit would settle it).
INSERT INTO messages (seq, group_id, event, priority, published_at, locked_by, lock_expiry,
                      attempts)
SELECT -:queued, :group_id, :event, :priority, :now, :token, :expiry, :attempts
WHERE NOT EXISTS (SELECT 1 FROM messages WHERE group_id = :group_id AND seq < 0)
  AND NOT EXISTS (SELECT 1 FROM executions WHERE id = :group_id
                  AND status IN ('succeeded', 'failed', 'cancelled', 'continued'));

-- name: fragment.relay_key
-- The key an event is published under: a relay that dies before it forgets the row
-- publishes nothing twice. A park's time is part of it: a park pushed back (a debounced
-- start's fold) is a new event.
'store:' || m.group_id || ':' || m.seq || ':' || m.published_at || ':' || COALESCE(m.lock_expiry, '')

-- name: due
-- What the store published for the transport: free events, and parked ones whose time has
-- surely come (a park stays here until then, so a signal or a cancel can still wake it
-- early); and an event a commit kept leased to its worker here (continue-as-new's staged
-- call) once that lease lapsed: its worker died before the next statement took it. A kept park (below) is not relayed again as it is, unless it was marked long
-- ago (:again: a relay that died between its mark and its publish; the transport takes
-- it once anyway, by its key). The lane is the execution's when the event's own is unset
-- (a commit's next event).
SELECT m.seq, m.group_id, m.event, m.priority, {{fragment.relay_key}} AS key,
       m.locked_by IS NOT NULL AS parked,
       COALESCE(m.lane, (SELECT e.lane FROM executions AS e WHERE e.id = m.group_id)) AS lane
FROM messages AS m
WHERE m.seq > 0
  AND (m.locked_by IS NULL OR m.lock_expiry <= :now)
  AND (m.dedup_key IS NULL OR m.dedup_key <> {{fragment.relay_key}} OR m.attempts < :again)
ORDER BY m.seq LIMIT :limit;

-- name: fragment.relayed
-- The rows of a relay (:rows, a JSON array of {seq, key}) still as they were read.
SELECT json_extract(r.value, '$.seq') AS seq FROM json_each(:rows) AS r
WHERE json_extract(r.value, '$.key') = (
  SELECT {{fragment.relay_key}} FROM messages AS m WHERE m.seq = json_extract(r.value, '$.seq'))

-- name: keep
-- Before the publish: a pending execution's first event, parked (a debounced start), is
-- kept, marked with the key it is published under (`dedup_key`), until a claim takes the
-- execution. A start of the same id meanwhile still folds into it (the trigger pushes the
-- park back: its key changes), and the claim of the delivery the fold made early finds
-- the mark stale and lets it go (`void_refolded`).
UPDATE messages SET attempts = :now, dedup_key = (
  SELECT json_extract(r.value, '$.key') FROM json_each(:rows) AS r
  WHERE json_extract(r.value, '$.seq') = messages.seq)
WHERE seq IN ({{fragment.relayed}})
  AND locked_by = '__parked__'
  AND group_id IN (SELECT id FROM executions WHERE status = 'pending');

-- name: current
-- In the request of `keep`, after it: the rows of the relay still as they were read (a
-- stale read may have seen a park since pushed back: that one is not published).
{{fragment.relayed}};

-- name: forget
-- After the publish: the other events the transport now holds (a park pushed back
-- meanwhile stays).
DELETE FROM messages
WHERE seq IN ({{fragment.relayed}}) AND (locked_by <> '__parked__' OR dedup_key IS NULL);

-- name: void_refolded
-- In a claim, before its reads: a pending execution whose kept first event was pushed back
-- by a fold after it was relayed (its mark is not its key any more) is not run on that
-- delivery: its mirror goes, the claim reads nothing of it and the worker acks it; the
-- park is relayed again at its new time. (No clock is compared: the relay's and this
-- worker's estimates of it may differ.)
DELETE FROM messages
WHERE locked_by = :token AND seq < 0
  AND group_id IN (SELECT m.group_id FROM messages AS m JOIN executions AS e
                   ON e.id = m.group_id AND e.status = 'pending'
                   WHERE m.seq > 0 AND m.locked_by = '__parked__'
                     AND m.dedup_key IS NOT NULL AND m.dedup_key <> {{fragment.relay_key}});

-- name: consume_kept
-- In a claim, before its reads: the kept first events of the executions it takes, as
-- they were relayed (their delivery is this one).
DELETE FROM messages AS m
WHERE m.seq > 0 AND m.locked_by = '__parked__' AND m.dedup_key = {{fragment.relay_key}}
  AND m.group_id IN (SELECT group_id FROM messages WHERE locked_by = :token AND seq < 0);

-- name: drop_finished
-- After the claim's reads: the mirrors of events of finished executions, which no commit
-- will settle (the worker only acks them in the queue).
DELETE FROM messages
WHERE locked_by = :token AND seq < 0
  AND group_id IN (SELECT id FROM executions
                   WHERE status IN ('succeeded', 'failed', 'cancelled', 'continued'));
