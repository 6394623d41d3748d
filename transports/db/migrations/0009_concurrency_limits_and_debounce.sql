-- Migration 9: cluster-wide concurrency limits (@engine.workflow(concurrency=...,
-- concurrency_key=...)), rate limits of steps (@engine.step(rate_limit=...)) and debounced
-- starts (engine.start(..., debounce=...)).
--
-- A concurrency limit is a count of *admitted* executions per limit key: an execution of a
-- limited workflow is admitted (it holds one of the key's slots) from the moment a slot is
-- free until it finishes, whichever worker runs it and whether or not it holds a lease at
-- the moment (a sleep keeps its slot). An execution that is not admitted waits in the
-- queue *gated*: its group's `ready_at` is GATE (1e18, beyond any clock), so no claim and
-- no `claimable` poll ever sees it -- it costs no Raft entry and no worker time while it
-- waits, and the claim statement (transports/queue.sql) is unchanged. Admission is FIFO per
-- key (executions' rowid: the order Raft applied their starts) and happens in the same
-- statement as what frees a slot: the commit that finishes an execution admits the next
-- one (trigger `execution_limit_freed`), a start admits the oldest waiters while slots are
-- free (trigger `group_gated`). A worker killed while it runs an admitted execution keeps
-- nothing: the lease lapses and another worker claims the execution, still admitted.
--
-- A debounced start parks the execution's first event until `debounce_until`; a start of
-- the same id while it is still pending and parked takes the new input and pushes the
-- deadline (one statement, ordered by Raft against the claim).
--
-- A rate limit is a table of reserved start times per key (`rate_slots`, below).
--
-- Rolling upgrade: expand only. Workers of version 8 keep running beside version 9: the
-- new columns have defaults (`admitted` 1: their executions are unlimited), and the
-- recreated start view keeps every old column, so their starts work as before. Only the
-- workflows that declare a limit or are started with debounce need version 9 workers.

-- name: executions.limit_key
-- "<workflow>" or "<workflow>:<concurrency_key(input)>"; NULL: no limit.
ALTER TABLE executions ADD COLUMN limit_key TEXT;

-- name: executions.limit_max
ALTER TABLE executions ADD COLUMN limit_max INTEGER;

-- name: executions.admitted
-- 1: holds a slot of its key (or has no limit); 0: waits for one, its group gated.
ALTER TABLE executions ADD COLUMN admitted INTEGER NOT NULL DEFAULT 1;

-- name: executions.by_limit
-- A key's slots held (admitted, pending or running) and its waiters in FIFO (rowid) order.
CREATE INDEX executions_by_limit ON executions (limit_key, admitted, status)
WHERE limit_key IS NOT NULL;

-- name: limits.opens_view
-- Inserting a row here admits the oldest waiters of a key while it has free slots.
CREATE VIEW limit_opens AS SELECT NULL AS key, NULL AS max;

-- name: limits.opens_trigger
CREATE TRIGGER limit_open INSTEAD OF INSERT ON limit_opens BEGIN
  UPDATE executions SET admitted = 1 WHERE rowid IN (
    SELECT rowid FROM executions
    WHERE limit_key = NEW.key AND admitted = 0 AND status = 'pending'
    ORDER BY rowid
    LIMIT max(0, NEW.max - (SELECT COUNT(*) FROM executions
                            WHERE limit_key = NEW.key AND admitted = 1
                              AND status IN ('pending', 'running'))));
END;

-- name: limits.admitted_trigger
-- An admitted execution's group becomes claimable (in its turn: a never-claimed group
-- comes first, oldest message first).
CREATE TRIGGER execution_admitted AFTER UPDATE OF admitted ON executions
WHEN NEW.admitted = 1 AND OLD.admitted = 0
BEGIN
  UPDATE groups SET ready_at = last_claimed_at WHERE group_id = NEW.id;
END;

-- name: limits.gated_trigger
-- The group of an execution that waits for a slot is created gated (until its workflow's
-- timeout, if it has one: then a worker claims it only to cancel it); then the key's
-- oldest waiters are admitted while slots are free (this one, if nobody waits before it).
CREATE TRIGGER group_gated AFTER INSERT ON groups
WHEN EXISTS (SELECT 1 FROM executions WHERE id = NEW.group_id AND admitted = 0)
BEGIN
  UPDATE groups SET ready_at = COALESCE(
      (SELECT deadline FROM executions WHERE id = NEW.group_id), 1e18)
    WHERE group_id = NEW.group_id;
  INSERT INTO limit_opens (key, max)
    SELECT limit_key, limit_max FROM executions WHERE id = NEW.group_id;
END;

-- name: limits.freed_trigger
-- A finished execution frees its slot: the next waiter is admitted in the same statement.
CREATE TRIGGER execution_limit_freed AFTER UPDATE OF status ON executions
WHEN NEW.limit_key IS NOT NULL
 AND NEW.status IN ('succeeded', 'failed', 'cancelled')
 AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  INSERT INTO limit_opens (key, max) VALUES (NEW.limit_key, NEW.limit_max);
END;

-- name: limits.resumed_trigger
-- engine.resume() of a limited execution: it queues for a slot again, like a start.
CREATE TRIGGER execution_limit_resumed AFTER UPDATE OF status ON executions
WHEN NEW.limit_key IS NOT NULL AND NEW.status = 'pending'
 AND OLD.status IN ('failed', 'cancelled')
BEGIN
  UPDATE executions SET admitted = 0 WHERE id = NEW.id;
END;

-- name: limits.cancelled_trigger
-- A waiter that is cancelled does not wait for a slot to be cancelled: its group opens
-- (it stays unadmitted, so it takes no slot) and the next worker ends it.
CREATE TRIGGER execution_limit_cancelled AFTER UPDATE OF cancel_reason ON executions
WHEN NEW.admitted = 0 AND NEW.cancel_reason IS NOT NULL AND NEW.status = 'pending'
BEGIN
  UPDATE groups SET ready_at = NEW.updated_at WHERE group_id = NEW.id AND ready_at > NEW.updated_at;
END;

-- name: starts.drop_trigger
DROP TRIGGER execution_start;

-- name: starts.drop_view
DROP VIEW execution_starts;

-- name: starts.view
-- Migration 2's view and three new columns: the limit (key and slots) and the debounce
-- deadline.
CREATE VIEW execution_starts AS SELECT
  NULL AS id, NULL AS workflow, NULL AS input, NULL AS priority, NULL AS event,
  NULL AS now, NULL AS commit_id, NULL AS parent_id, NULL AS deadline,
  NULL AS lease_token, NULL AS lease_expiry,
  NULL AS limit_key, NULL AS limit_max, NULL AS debounce_until;

-- name: starts.trigger
-- As migration 2's, plus: a debounced start of an id that is still pending with its
-- first event parked (a debounced start that has not run yet) folds into it -- the new
-- input, the new deadline -- and a limited execution is created unadmitted (its group
-- then gated by `group_gated`).
CREATE TRIGGER execution_start INSTEAD OF INSERT ON execution_starts BEGIN
  UPDATE executions SET input = NEW.input, updated_at = NEW.now
    WHERE NEW.debounce_until IS NOT NULL AND id = NEW.id AND workflow = NEW.workflow
      AND status = 'pending'
      AND EXISTS (SELECT 1 FROM messages WHERE group_id = NEW.id AND locked_by = '__parked__');
  UPDATE messages SET lock_expiry = NEW.debounce_until
    WHERE NEW.debounce_until IS NOT NULL AND group_id = NEW.id AND locked_by = '__parked__'
      AND EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND workflow = NEW.workflow
                    AND status = 'pending');
  SELECT RAISE(IGNORE) WHERE EXISTS (SELECT 1 FROM executions WHERE id = NEW.id);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, parent_id, deadline, limit_key, limit_max, admitted)
    VALUES (NEW.id, NEW.workflow,
            CASE WHEN NEW.lease_token IS NULL THEN 'pending' ELSE 'running' END,
            NEW.input, NEW.priority, NEW.now, NEW.now,
            NEW.commit_id, NEW.parent_id, NEW.deadline,
            NEW.limit_key, NEW.limit_max, NEW.limit_key IS NULL);
  INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                        attempts)
    VALUES (NEW.id, NEW.event, NEW.priority, NEW.now,
            CASE WHEN NEW.lease_token IS NOT NULL THEN NEW.lease_token
                 WHEN NEW.debounce_until IS NOT NULL THEN '__parked__' END,
            COALESCE(NEW.lease_expiry, NEW.debounce_until),
            NEW.lease_token IS NOT NULL);
END;

-- name: rate_slots
-- @engine.step(rate_limit=RateLimit(n, per=seconds, key=...)): the start times reserved
-- for a rate limit's key. A reservation takes the earliest time at or after the last one
-- that leaves at most n reservations in any `per` seconds; the step waits for it (parked
-- when it is far). `token` ("<execution>:<call index>:<attempt>") makes a reservation
-- idempotent: the replay after a park, or a retried request, finds its own.
CREATE TABLE rate_slots (
  key   TEXT NOT NULL,
  token TEXT NOT NULL,
  at    REAL NOT NULL,
  PRIMARY KEY (key, token)
) WITHOUT ROWID;

-- name: rate_slots.by_time
CREATE INDEX rate_slots_by_time ON rate_slots (key, at);

-- name: forks.drop_trigger
DROP TRIGGER execution_fork;

-- name: forks.trigger
-- As migration 6's, and a fork of a limited execution queues for a slot of the same key.
CREATE TRIGGER execution_fork INSTEAD OF INSERT ON execution_forks
WHEN NOT EXISTS (SELECT 1 FROM executions WHERE id = NEW.id)
BEGIN
  SELECT RAISE(ABORT, 'raftflow: no such execution') WHERE NOT EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.source);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, deadline, limit_key, limit_max, admitted)
    SELECT NEW.id, workflow, 'pending', input, priority, NEW.now, NEW.now, NEW.commit_id,
           NULL, limit_key, limit_max, limit_key IS NULL
    FROM executions WHERE id = NEW.source;
  INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                     worker_id, kind, attempts, wake_at, history)
    SELECT NEW.id, idx, name, status, output, error, started_at, ended_at, worker_id, kind,
           attempts, wake_at, history
    FROM steps WHERE execution_id = NEW.source AND idx < NEW.from_step
      AND status IN ('succeeded', 'failed');
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT NEW.id, NEW.event, priority, NEW.now FROM executions WHERE id = NEW.source;
END;
