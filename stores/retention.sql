-- Retention: finished executions older than the retention period, deleted with everything
-- of theirs (stores/retention.py). Times are parameters, never SQL's clock.

-- name: fragment.expired
-- A batch of finished executions (archived runs of continue_as_new included) that ended
-- before :cutoff, oldest first, on the `executions_finished` index (`+status`: left to
-- itself SQLite takes the status index and sorts every finished execution).
-- Not a child whose parent still runs: the parent may yet call its result(), which would
-- wait for ever for a deleted child. Such children go once their parent has finished.
SELECT id FROM executions AS x
WHERE completed_at < :cutoff AND +status IN ('succeeded', 'failed', 'cancelled', 'continued')
  AND NOT EXISTS (SELECT 1 FROM executions AS p
                  WHERE p.id = x.parent_id AND p.status IN ('pending', 'running'))
ORDER BY completed_at LIMIT :batch

-- name: expired_any
-- The holder's idle check (a weak read): is there anything to delete?
SELECT EXISTS ({{fragment.expired}}) AS due;

-- name: delete_steps
DELETE FROM steps WHERE execution_id IN ({{fragment.expired}});

-- name: delete_signals
DELETE FROM signals WHERE execution_id IN ({{fragment.expired}});

-- name: delete_events
DELETE FROM events WHERE execution_id IN ({{fragment.expired}});

-- name: delete_streams
DELETE FROM streams WHERE execution_id IN ({{fragment.expired}});

-- name: delete_remote_children
-- A parent's notes of its children on other clusters (sharded; none otherwise).
DELETE FROM remote_children WHERE parent_id IN ({{fragment.expired}});

-- name: delete_messages
-- Events left in a finished execution's group (none normally; a late wake at most).
DELETE FROM messages WHERE group_id IN ({{fragment.expired}})
  AND (locked_by IS NULL OR locked_by = '__parked__' OR lock_expiry < :now);

-- name: delete_executions
-- Last: the statements above select the same batch, since they leave these rows alone.
DELETE FROM executions WHERE id IN ({{fragment.expired}});
