-- What operators see and what workers say about themselves: the reads of `raftflow queue`,
-- `raftflow workers`, `raftflow get` and the dashboard, and the workers' presence beat.
-- Times are parameters (see transports/queue.sql); every read goes through an index
-- (tests/unit/test_query_plans.py). The tables are in transports/db/migrations/.

-- ---------------------------------------------------------------- the queue

-- name: queue_depth
-- One priority: its groups (executions with an event queued), those claimable now, and
-- since when the oldest claimable head has waited (a free head since its publish, a
-- lapsed lease or a due park since its deadline). Index groups_ready for the groups,
-- messages_by_group for their heads.
SELECT :priority AS priority,
  (SELECT COUNT(*) FROM groups WHERE priority = :priority) AS groups,
  (SELECT COUNT(*) FROM groups WHERE priority = :priority AND ready_at <= :now) AS ready,
  (SELECT MIN(CASE WHEN m.locked_by IS NULL THEN m.published_at ELSE m.lock_expiry END)
     FROM groups AS g
     JOIN messages AS m
       ON m.seq = (SELECT MIN(h.seq) FROM messages AS h WHERE h.group_id = g.group_id)
    WHERE g.priority = :priority AND g.ready_at <= :now) AS oldest_ready;

-- name: parked
-- Events parked until a deadline (sleeps, waits, back-offs) that is still ahead, and how
-- many of them are cron schedules' messages (groups "raftflow:schedule:<workflow>").
SELECT COUNT(*) AS parked,
       COALESCE(SUM(group_id > 'raftflow:schedule:' AND group_id < 'raftflow:schedule;'), 0)
         AS schedules
FROM messages
WHERE locked_by = '__parked__' AND lock_expiry > :now;

-- name: limit_waiting
-- Executions waiting for a slot of a concurrency limit (migration 9: not admitted, their
-- group gated), per limit key: how many, the next to be admitted (FIFO: lowest rowid; a
-- bare column of MIN() is taken from that row) and since when it waits, and the slots
-- held now. Walks the pending executions (the queue's backlog), each key's slots on
-- executions_by_limit; a cancelled waiter is no longer waiting. INDEXED BY: with the
-- statistics of ANALYZE, SQLite prefers walking executions_by_limit, which holds every
-- limited execution ever run: a walk that grows with the history, not with the backlog.
SELECT e.limit_key, e.workflow, e.limit_max, COUNT(*) AS waiting, MIN(e.rowid) AS head,
       e.id AS next_id, e.created_at AS next_since,
       (SELECT COUNT(*) FROM executions AS h
        WHERE h.limit_key = e.limit_key AND h.admitted = 1
          AND h.status IN ('pending', 'running')) AS holding
FROM executions AS e INDEXED BY executions_by_status
WHERE e.status = 'pending' AND e.admitted = 0 AND e.limit_key IS NOT NULL
  AND e.cancel_reason IS NULL
GROUP BY e.limit_key ORDER BY e.limit_key LIMIT :limit;

-- name: leases
-- Every lease held (tokens are "<worker id>:<32 hex>"), oldest deadline first: the two
-- ranges of the token index on either side of '__parked__'.
SELECT seq, group_id, locked_by, lock_expiry, attempts FROM messages
WHERE locked_by < '__parked__' OR locked_by > '__parked__'
ORDER BY lock_expiry LIMIT :limit;

-- ---------------------------------------------------------------- one execution

-- name: signals_of
SELECT seq, topic, payload, sent_at, consumed_idx, consumed_at FROM signals
WHERE execution_id = :id ORDER BY seq;

-- name: events_of
SELECT key, value, updated_at FROM events WHERE execution_id = :id ORDER BY key;

-- name: messages_of
-- The execution's queued events: who leases the head, until when.
SELECT seq, locked_by, lock_expiry, published_at, attempts FROM messages
WHERE group_id = :id ORDER BY seq;

-- ---------------------------------------------------------------- workers

-- name: workers_seen
SELECT worker_id, host, pid, version, concurrency, min_priority, state, started_at, seen_at,
       steps, running
FROM workers WHERE seen_at >= :since ORDER BY seen_at;

-- name: beat
-- A worker's presence (the first beat inserts its row).
INSERT INTO workers (worker_id, host, pid, version, concurrency, min_priority, state,
                     started_at, seen_at, steps, running, lanes, starts)
VALUES (:worker_id, :host, :pid, :version, :concurrency, :min_priority, :state,
        :started_at, :now, :steps, :running, :lanes, :starts)
ON CONFLICT (worker_id) DO UPDATE SET state = excluded.state, seen_at = excluded.seen_at,
                                      steps = excluded.steps, running = excluded.running,
                                      lanes = excluded.lanes, starts = excluded.starts;

-- name: forget_workers
DELETE FROM workers WHERE seen_at < :cutoff;

-- name: take_duty
-- Take (or renew) a duty: held by this worker, or lapsed.
INSERT INTO worker_duties (duty, worker_id, expiry) VALUES (:duty, :worker_id, :expiry)
ON CONFLICT (duty) DO UPDATE SET worker_id = excluded.worker_id, expiry = excluded.expiry
WHERE worker_duties.worker_id = excluded.worker_id OR worker_duties.expiry < :now;

-- name: duty_holder
SELECT worker_id, expiry FROM worker_duties WHERE duty = :duty;

-- name: drop_duty
DELETE FROM worker_duties WHERE duty = :duty AND worker_id = :worker_id;
