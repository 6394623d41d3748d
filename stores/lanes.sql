-- What each lane holds and who serves it: the reads of `raftflow queue`'s table of queues
-- and of `raftflow schedules`' "served by". Times are parameters (transports/queue.sql).

-- name: lane_depth
-- Per lane: its groups (queued executions and schedules), those claimable now, those
-- leased now, and since when the oldest claimable head has waited (as `queue_depth`:
-- a free head since its publish, a lapsed lease or a due park since its deadline).
-- An operator's read: it visits every group once (index groups_served), each head by
-- messages_by_group.
SELECT lane, COUNT(*) AS groups, SUM(ready) AS ready, SUM(leased) AS leased,
       MIN(CASE WHEN ready THEN waited_since END) AS oldest_ready
FROM (SELECT g.lane AS lane, g.ready_at <= :now AS ready,
             m.locked_by IS NOT NULL AND m.locked_by <> '__parked__' AS leased,
             CASE WHEN m.locked_by IS NULL THEN m.published_at ELSE m.lock_expiry END
               AS waited_since
      FROM groups AS g
      JOIN messages AS m
        ON m.seq = (SELECT MIN(h.seq) FROM messages AS h WHERE h.group_id = g.group_id))
GROUP BY lane ORDER BY lane LIMIT :limit;

-- name: serving_workers
-- The live workers and the lanes each serves (NULL: a worker of a release before lanes,
-- which claims every lane).
SELECT worker_id, lanes FROM workers
WHERE seen_at >= :since AND state <> 'stopped' ORDER BY worker_id;
