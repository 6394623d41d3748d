-- What a start by name reads to choose its lane (engine/client/routing.py): the lanes the
-- running workers serve, and the start settings they publish (engine/workflow/starts.py).
-- Times are parameters (transports/queue.sql).

-- name: running_workers
-- The workers that beat within the last minute and are not draining or stopped (a
-- draining one takes no new work), with the lanes each serves (NULL: a worker of a release
-- before lanes, which claims every lane), when it started and its start settings (NULL: a
-- worker before them). One row per worker (a few hundred at most: the table is small and
-- read whole).
SELECT lanes, started_at, starts FROM workers
WHERE seen_at >= :since AND state = 'running' ORDER BY worker_id;

-- name: execution_lane
-- An execution's workflow and lane (`to_current_version` from a client).
SELECT workflow, lane FROM executions WHERE id = :id;
