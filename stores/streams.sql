-- Durable streams (migration 13): values a workflow appends to a key of its execution,
-- written by the commit that records the call (engine/workflow/streams.py), read by
-- anyone from a position on (stores/streams.py). Positions count from 0 in the order
-- written; the commit's transaction orders the writes of one execution.

-- name: fragment.next_position
(SELECT COALESCE(MAX(position) + 1, 0) FROM streams
 WHERE execution_id = :execution_id AND key = :key)

-- name: fragment.open
NOT EXISTS (SELECT 1 FROM streams
            WHERE execution_id = :execution_id AND key = :key AND closed = 1)

-- name: write
-- One value at the next position; no row while the stream is closed or holds
-- :max_values values (the commit expects one row: the call is then refused, not lost).
INSERT INTO streams (execution_id, key, position, value, closed, run, call_idx, written_at)
SELECT :execution_id, :key, {{fragment.next_position}}, :value, 0, :run, :call_idx, :now
WHERE {{fragment.open}} AND {{fragment.next_position}} < :max_values;

-- name: write_live
-- A value written while a step runs (an agent's text deltas), not by a recorded call: at
-- the next position like any value, only while the step's worker holds the execution's
-- lease (a worker that lost it writes nothing), numbered run 0 and a call index of its
-- own below every earlier one (index streams_by_call), since no call records it.
INSERT INTO streams (execution_id, key, position, value, closed, run, call_idx, written_at)
SELECT :execution_id, :key, {{fragment.next_position}}, :value, 0, 0,
       (SELECT COALESCE(MIN(call_idx), 0) - 1 FROM streams
        WHERE execution_id = :execution_id AND run = 0),
       :now
WHERE {{fragment.open}} AND {{fragment.next_position}} < :max_values
  AND EXISTS (SELECT 1 FROM messages
              WHERE group_id = :execution_id AND locked_by = :lease_token);

-- name: close
-- The close row, last; closing a closed stream writes nothing.
INSERT INTO streams (execution_id, key, position, value, closed, run, call_idx, written_at)
SELECT :execution_id, :key, {{fragment.next_position}}, NULL, 1, :run, :call_idx, :now
WHERE {{fragment.open}};

-- name: state
-- Why a write was refused: closed, or full.
SELECT NOT {{fragment.open}} AS closed, {{fragment.next_position}} AS length;

-- name: read
-- A page of a stream from :position on (read with `status`, in one request).
SELECT position, value, closed FROM streams WHERE execution_id = :execution_id AND key = :key AND position >= :position
ORDER BY position LIMIT :limit;

-- name: status
SELECT status FROM executions WHERE id = :execution_id;

-- name: keys
-- An execution's streams (the dashboard): each key, its length and whether it is closed.
SELECT key, SUM(1 - closed) AS length, MAX(closed) AS closed FROM streams
WHERE execution_id = :execution_id GROUP BY key ORDER BY key LIMIT 1000;
