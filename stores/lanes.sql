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

-- name: present_lanes
-- Every lane that holds a group, one index seek each (groups_served): a walk of the
-- distinct values, not of every group.
WITH RECURSIVE present(lane) AS (
  SELECT MIN(lane) FROM groups
  UNION ALL
  SELECT (SELECT MIN(g.lane) FROM groups AS g WHERE g.lane > present.lane)
  FROM present WHERE present.lane IS NOT NULL
)
SELECT lane FROM present WHERE lane IS NOT NULL LIMIT :limit;

-- name: other_workers_lanes
-- The lanes of the live workers but one (NULL: a worker that claims every lane).
SELECT lanes FROM workers
WHERE seen_at >= :since AND state <> 'stopped' AND worker_id <> :worker_id;

-- name: in_flight_by_lane
-- `raftflow versions`: executions not finished, per lane (index executions_by_status).
SELECT lane, COUNT(*) AS executions FROM executions
WHERE status IN ('pending', 'running') GROUP BY lane;

-- name: promote_executions
-- `raftflow versions promote`: a batch of the unfinished executions of version :old
-- moved to :new (their lane's "@<version>" suffix), so workers of :new run them.
UPDATE executions SET lane = substr(lane, 1, length(lane) - length(:old)) || :new
WHERE rowid IN (
  SELECT rowid FROM executions
  WHERE status IN ('pending', 'running') AND substr(lane, -length(:old) - 1) = '@' || :old
  LIMIT :batch);

-- name: promote_groups
-- And a batch of their groups (whose lane the claims read).
UPDATE groups SET lane = substr(lane, 1, length(lane) - length(:old)) || :new
WHERE rowid IN (
  SELECT rowid FROM groups WHERE substr(lane, -length(:old) - 1) = '@' || :old
  LIMIT :batch);
