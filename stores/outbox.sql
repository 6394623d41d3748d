-- A sharded deployment's messages between clusters (stores/outbox.py; the tables and the
-- triggers that fill the outbox: transports/db/migrations/0015_remote_children.sql).
-- Times are parameters (transports/queue.sql).

-- name: note_child
-- On the parent's cluster, before its child is started on another: the parent now waits
-- for news of it (a note written once; the start that follows is idempotent by the id).
-- Fenced by the parent's lease: a worker whose lease lapsed notes nothing, and so starts
-- nothing there -- the parent may be cancelled by now, and no cancel would reach a child
-- started after it.
INSERT INTO remote_children (parent_id, id, workflow, status, updated_at)
SELECT :parent_id, :id, :workflow, 'pending', :now
WHERE EXISTS (SELECT 1 FROM messages WHERE seq = :lease_seq AND locked_by = :lease_token)
ON CONFLICT (parent_id, id) DO NOTHING;

-- name: noted
-- After `note_child`, in its request: whether the note is there (now, or from an earlier
-- attempt of the same call).
SELECT COUNT(*) AS noted FROM remote_children WHERE parent_id = :parent_id AND id = :id;

-- name: pending
-- What this cluster has to tell others, oldest first.
SELECT seq, target, kind, source, payload FROM outbox ORDER BY seq LIMIT :limit;

-- name: backlog
-- How much news waits to be relayed, and since when.
SELECT COUNT(*) AS rows, MIN(created_at) AS oldest FROM outbox;

-- name: child_finished
-- On the parent's cluster: the outcome of its child, applied once (a relay may deliver it
-- again), and the parent woken if it waits parked -- as a local child's finish does.
UPDATE remote_children SET
  status = json_extract(:payload, '$.status'), output = json_extract(:payload, '$.output'),
  error = json_extract(:payload, '$.error'),
  cancel_reason = json_extract(:payload, '$.cancel_reason'), updated_at = :now
WHERE parent_id = :parent_id AND id = :id
  AND status NOT IN ('succeeded', 'failed', 'cancelled');

-- name: wake
UPDATE messages SET lock_expiry = :now
WHERE group_id = :id AND locked_by = '__parked__' AND lock_expiry > :now;

-- name: delivered
DELETE FROM outbox WHERE seq = :seq;

-- name: child_workflow
-- On the parent's cluster: the workflow of a child it noted elsewhere.
SELECT workflow FROM remote_children WHERE parent_id = :parent_id AND id = :id;

-- name: cancelled_before_start
-- On a child's cluster: the cancel of a child its parent noted but whose start has not
-- arrived (the parent's worker may still send it, from before the cancel): the child is
-- written cancelled, so that start finds it finished and nothing runs. An execution of the
-- id already there is left as it is (the cancel that follows this applies to it).
INSERT INTO executions (id, workflow, status, input, error, created_at, updated_at,
                        completed_at, commit_id, parent_id, cancel_reason)
VALUES (:id, :workflow, 'cancelled', 'null', :error, :now, :now, :now, :commit_id,
        :parent_id, :reason)
ON CONFLICT (id) DO NOTHING;
