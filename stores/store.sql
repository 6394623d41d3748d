-- Executions, their recorded calls, signals and events: every statement of the store and
-- of the engine's commits, sync and async. The store lives in the same database as the
-- queue (transports/queue.sql), which lets one statement checkpoint a step, ack its event
-- and publish the next one. Times are parameters, never SQL's clock (see queue.sql). The
-- tables, views and triggers (the fenced commit among them) are in the schema:
-- transports/db/migrations/.

-- name: fragment.execution_columns
-- steps_done is counted: a step committed within a worker's turn does not touch the row.
{{fragment.claimed_columns}},
(SELECT COUNT(*) FROM steps AS s
 WHERE s.execution_id = executions.id AND s.status IN ('succeeded', 'failed')) AS steps_done

-- name: fragment.claimed_columns
-- What a worker reads of what it claims (no count: its cost grows with the history).
id, workflow, status, input, output, error, priority, created_at, updated_at, completed_at,
parent_id, cancel_reason, deadline, trace_context, run

-- name: fragment.step_columns
execution_id, idx, name, status, output, error, started_at, ended_at, worker_id, kind,
attempts, wake_at, history

-- name: start
-- limit_key, limit_max: the execution waits for a slot of its limit; debounce_until: its
-- first event is parked until then, and a start of the same id meanwhile folds into it;
-- lane: what a worker serves to claim its events (transports/lanes.py).
INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id,
                              parent_id, deadline, lease_token, lease_expiry,
                              limit_key, limit_max, debounce_until, lane)
VALUES (:id, :workflow, :input, :priority, :event, :now, :commit_id, :parent_id, :deadline,
        :lease_token, :lease_expiry, :limit_key, :limit_max, :debounce_until, :lane);

-- name: set_trace_context
-- In the start's transaction, when the caller runs in a trace: only an execution this
-- start created (its commit id, not yet replaced by any commit) takes the context.
UPDATE executions SET trace_context = :trace_context WHERE id = :id AND commit_id = :commit_id;

-- name: start_outcome
-- Read in the start's request, after it: the execution, whether this start created it
-- (its commit id) or found it there, and the first event it leased (the fast path), if
-- any. One read instead of three: each read costs the request a statement to prepare.
SELECT {{fragment.execution_columns}}, commit_id = :commit_id AS created,
       (SELECT seq FROM messages WHERE group_id = :id AND locked_by = :lease_token)
         AS lease_seq,
       (SELECT lock_expiry FROM messages WHERE group_id = :id AND locked_by = :lease_token)
         AS lease_expiry
FROM executions WHERE id = :id;

-- name: start_direct
-- A start without a concurrency limit or a debounce (almost all of them): the two inserts
-- the start trigger makes for it, as two plain statements of one transaction, whose
-- results tell the caller all it needs -- `rows_affected` whether this start created the
-- execution, the event's `last_insert_id` its seq (the start fast path's lease, engine/
-- local.py) -- so the request carries no read. The view's trigger program would be
-- compiled on every node for every start (rqlite 8.26 prepares every statement anew), and
-- a read makes the request a mixed one. The rows: tests/integration/test_starts.py.
INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                        commit_id, parent_id, deadline, trace_context, lane)
SELECT :id, :workflow, CASE WHEN :lease_token IS NULL THEN 'pending' ELSE 'running' END,
       :input, :priority, :now, :now, :commit_id, :parent_id, :deadline, :trace_context,
       :lane
WHERE NOT EXISTS (SELECT 1 FROM executions WHERE id = :id);

-- name: start_direct_event
-- Only after the insert above created the execution (an existing id changes nothing).
INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                      attempts)
SELECT :id, :event, :priority, :now, :lease_token, :lease_expiry, :lease_token IS NOT NULL
WHERE changes() = 1;

-- name: commit
-- The commits of a batch as one JSON array (one object per commit, keys = the view's
-- columns): one static statement whatever the batch size. rqlite 8.26 prepares every
-- statement anew on every node, and preparing this trigger chain costs more than
-- running it, so one multi-row statement prepares it once for the batch, not per commit.
INSERT INTO execution_commits (
  execution_id, lease_seq, lease_token, commit_id, now, worker_id,
  step_idx, step_name, step_status, step_output, step_error, step_started_at,
  status, output, error, next_event, next_priority, next_token, next_expiry,
  step_kind, step_attempts, step_wake_at, step_attempt,
  consume_signal, park_until, wake_topic, wake_child)
SELECT
  json_extract(c.value, '$.execution_id'), json_extract(c.value, '$.lease_seq'),
  json_extract(c.value, '$.lease_token'), json_extract(c.value, '$.commit_id'),
  json_extract(c.value, '$.now'), json_extract(c.value, '$.worker_id'),
  json_extract(c.value, '$.step_idx'), json_extract(c.value, '$.step_name'),
  json_extract(c.value, '$.step_status'), json_extract(c.value, '$.step_output'),
  json_extract(c.value, '$.step_error'), json_extract(c.value, '$.step_started_at'),
  json_extract(c.value, '$.status'), json_extract(c.value, '$.output'),
  json_extract(c.value, '$.error'), json_extract(c.value, '$.next_event'),
  json_extract(c.value, '$.next_priority'), json_extract(c.value, '$.next_token'),
  json_extract(c.value, '$.next_expiry'),
  json_extract(c.value, '$.step_kind'), json_extract(c.value, '$.step_attempts'),
  json_extract(c.value, '$.step_wake_at'), json_extract(c.value, '$.step_attempt'),
  json_extract(c.value, '$.consume_signal'), json_extract(c.value, '$.park_until'),
  json_extract(c.value, '$.wake_topic'), json_extract(c.value, '$.wake_child')
FROM json_each(:commits) AS c;

-- name: fragment.lean_step_values
-- A step's record from the object `c` of a commit batch (the lean commits below).
json_extract(c.value, '$.execution_id'), json_extract(c.value, '$.step_idx'),
json_extract(c.value, '$.step_name'), json_extract(c.value, '$.step_status'),
json_extract(c.value, '$.step_output'), json_extract(c.value, '$.step_error'),
json_extract(c.value, '$.step_started_at'), json_extract(c.value, '$.now'),
json_extract(c.value, '$.worker_id'), json_extract(c.value, '$.step_kind'),
json_extract(c.value, '$.step_wake_at'), json_extract(c.value, '$.commit_id')

-- name: fragment.lean_fence
-- The lease still holds and no cancel waits: a cancelled execution's step takes the full
-- commit, which also ends the worker's turn.
EXISTS (SELECT 1 FROM messages AS m WHERE m.seq = json_extract(c.value, '$.lease_seq')
        AND m.locked_by = json_extract(c.value, '$.lease_token'))
AND (SELECT e.cancel_reason FROM executions AS e
     WHERE e.id = json_extract(c.value, '$.execution_id')) IS NULL

-- name: lean_commit
-- The checkpoint of a step within a worker's turn: one plain INSERT, no view, no trigger
-- (migration 3). Its event stays leased to the worker as it is.
INSERT OR IGNORE INTO steps (execution_id, idx, name, status, output, error, started_at,
                             ended_at, worker_id, kind, wake_at, commit_id)
SELECT {{fragment.lean_step_values}}
FROM json_each(:commits) AS c WHERE {{fragment.lean_fence}};

-- name: lean_step
-- `lean_commit` of a lone commit (nothing to batch it with: one execution at a time), with
-- named parameters: no JSON to parse on every node.
INSERT OR IGNORE INTO steps (execution_id, idx, name, status, output, error, started_at,
                             ended_at, worker_id, kind, wake_at, commit_id)
SELECT :execution_id, :step_idx, :step_name, :step_status, :step_output, :step_error,
       :step_started_at, :now, :worker_id, :step_kind, :step_wake_at, :commit_id
WHERE {{fragment.final_held}}
  AND (SELECT e.cancel_reason FROM executions AS e WHERE e.id = :execution_id) IS NULL;

-- name: lean_outcome
-- Which lean commits applied (now or in an earlier attempt), and whose lease still holds.
SELECT c.key AS position, s.commit_id = json_extract(c.value, '$.commit_id') AS applied,
       m.seq IS NOT NULL AS held
FROM json_each(:commits) AS c
LEFT JOIN steps AS s ON s.execution_id = json_extract(c.value, '$.execution_id')
                    AND s.idx = json_extract(c.value, '$.step_idx')
LEFT JOIN messages AS m ON m.seq = json_extract(c.value, '$.lease_seq')
                       AND m.locked_by = json_extract(c.value, '$.lease_token');

-- ---------------------------------------------------------------- lean final commits
-- The outcome of an execution (succeeded or failed) with the record of its last call and
-- the ack of its event: the three writes of the `execution_commits` trigger that such a
-- commit makes (no next event, no signal taken, no attempt appended), as three plain
-- statements of one transactional request (one Raft entry; stores/commit_sql.py). Each is
-- fenced by the same lease check, evaluated on the same state (the ack comes last), so a
-- stale worker's commit writes nothing. What else the trigger chain does for a finished
-- execution -- wake its parent, free its limit's slot and admit the next waiter, recompute
-- its group -- are AFTER triggers of `executions` and `messages` (migrations 1, 2 and 9):
-- they fire for these statements exactly as for the trigger's own. A lone commit takes
-- named parameters (no JSON to parse on every node); a batch of them one JSON array, as
-- the other commits.

-- name: fragment.final_held
EXISTS (SELECT 1 FROM messages AS m WHERE m.seq = :lease_seq AND m.locked_by = :lease_token)

-- name: lean_final
-- The trigger's UPDATE of the execution, column for column.
UPDATE executions SET
    status = :status,
    output = COALESCE(:output, output),
    error = COALESCE(:error, error),
    updated_at = :now,
    completed_at = :now,
    steps_done = steps_done + COALESCE(:step_status IN ('succeeded', 'failed'), 0),
    commit_id = :commit_id
WHERE id = :execution_id AND {{fragment.final_held}};

-- name: lean_final_step
-- The trigger's upsert of the call's record (a waiting call is completed in place).
INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                   worker_id, kind, attempts, wake_at, history)
SELECT :execution_id, :step_idx, :step_name, :step_status, :step_output, :step_error,
       :step_started_at, :now, :worker_id, COALESCE(:step_kind, 'step'),
       COALESCE(:step_attempts, 1), :step_wake_at, NULL
WHERE :step_idx IS NOT NULL AND {{fragment.final_held}}
ON CONFLICT (execution_id, idx) DO UPDATE SET
  status = excluded.status, output = excluded.output, error = excluded.error,
  ended_at = excluded.ended_at, worker_id = excluded.worker_id,
  attempts = excluded.attempts, wake_at = excluded.wake_at;

-- name: fragment.execution_row
-- Every column of `executions`, and its rowid: the target of the statements that write a
-- row as a REPLACE of itself (the order of their SELECT's columns). A migration that adds
-- a column adds it here and there (tests/integration/test_final_commits.py checks this).
rowid, id, workflow, status, input, output, error, priority, created_at, updated_at,
completed_at, steps_done, commit_id, parent_id, cancel_reason, deadline, trace_context,
run, limit_key, limit_max, admitted, lane

-- name: lean_final_unlinked
-- `lean_final` for an execution with no parent and no concurrency limit (the engine tells
-- it from its record; the WHERE checks it again): the same row, written as a REPLACE of
-- itself (same rowid, every column) instead of an UPDATE. An UPDATE of `status` compiles
-- the programs of the three status triggers and what they fire in turn (on every node,
-- for every commit: rqlite 8.26 prepares every statement anew),
-- and for such an execution each of them does nothing: `execution_finished` wakes a parent
-- (there is none) and cancels children (only for a cancel, which takes the full commit),
-- `execution_limit_freed` and `execution_limit_resumed` need a limit. REPLACE fires no
-- trigger of `executions` (it has no insert trigger; its delete triggers would fire only
-- with recursive_triggers).
-- tests/integration/test_final_commits.py checks the rows, and that the columns and the
-- triggers of `executions` are still the ones named here: a new column or trigger must be
-- added here too.
REPLACE INTO executions ({{fragment.execution_row}})
SELECT rowid, id, workflow, :status, input, COALESCE(:output, output),
       COALESCE(:error, error), priority, created_at, :now, :now,
       steps_done + COALESCE(:step_status IN ('succeeded', 'failed'), 0), :commit_id,
       parent_id, cancel_reason, deadline, trace_context, run, limit_key, limit_max, admitted,
       lane
FROM executions
WHERE id = :execution_id AND parent_id IS NULL AND limit_key IS NULL
  AND {{fragment.final_held}};

-- name: lean_final_ack
-- Last: the lease's message goes (its delete trigger drops or recomputes the group) --
-- only if the execution took this commit (the unlinked form may find a parent or a limit
-- after all: then nothing is acked, and the commit goes again in full).
DELETE FROM messages WHERE seq = :lease_seq AND locked_by = :lease_token
  AND EXISTS (SELECT 1 FROM executions WHERE id = :execution_id AND commit_id = :commit_id);

-- name: fragment.finals_held
EXISTS (SELECT 1 FROM messages AS m WHERE m.seq = json_extract(c.value, '$.lease_seq')
        AND m.locked_by = json_extract(c.value, '$.lease_token'))

-- name: lean_finals
-- `lean_final` for each object `c` of a batch.
UPDATE executions SET
    status = json_extract(c.value, '$.status'),
    output = COALESCE(json_extract(c.value, '$.output'), executions.output),
    error = COALESCE(json_extract(c.value, '$.error'), executions.error),
    updated_at = json_extract(c.value, '$.now'),
    completed_at = json_extract(c.value, '$.now'),
    steps_done = executions.steps_done
      + COALESCE(json_extract(c.value, '$.step_status') IN ('succeeded', 'failed'), 0),
    commit_id = json_extract(c.value, '$.commit_id')
FROM json_each(:commits) AS c
WHERE executions.id = json_extract(c.value, '$.execution_id') AND {{fragment.finals_held}};

-- name: lean_finals_steps
INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                   worker_id, kind, attempts, wake_at, history)
SELECT json_extract(c.value, '$.execution_id'), json_extract(c.value, '$.step_idx'),
       json_extract(c.value, '$.step_name'), json_extract(c.value, '$.step_status'),
       json_extract(c.value, '$.step_output'), json_extract(c.value, '$.step_error'),
       json_extract(c.value, '$.step_started_at'), json_extract(c.value, '$.now'),
       json_extract(c.value, '$.worker_id'),
       COALESCE(json_extract(c.value, '$.step_kind'), 'step'),
       COALESCE(json_extract(c.value, '$.step_attempts'), 1),
       json_extract(c.value, '$.step_wake_at'), NULL
FROM json_each(:commits) AS c
WHERE json_extract(c.value, '$.step_idx') IS NOT NULL AND {{fragment.finals_held}}
ON CONFLICT (execution_id, idx) DO UPDATE SET
  status = excluded.status, output = excluded.output, error = excluded.error,
  ended_at = excluded.ended_at, worker_id = excluded.worker_id,
  attempts = excluded.attempts, wake_at = excluded.wake_at;

-- name: lean_finals_ack
DELETE FROM messages
WHERE (seq, locked_by) IN (SELECT json_extract(c.value, '$.lease_seq'),
                                  json_extract(c.value, '$.lease_token')
                           FROM json_each(:commits) AS c);

-- name: final_outcome
-- Which lean final commits applied (now or in an earlier attempt), and whose lease holds.
SELECT c.key AS position, e.commit_id = json_extract(c.value, '$.commit_id') AS applied,
       {{fragment.finals_held}} AS held
FROM json_each(:commits) AS c
LEFT JOIN executions AS e ON e.id = json_extract(c.value, '$.execution_id');

-- name: continue
-- engine.continue_as_new(): this run ends, the next one starts (migration 5).
INSERT INTO execution_continues (execution_id, lease_seq, lease_token, commit_id, now, input,
                                 next_event)
VALUES (:execution_id, :lease_seq, :lease_token, :commit_id, :now, :input, :next_event);

-- name: continued
SELECT commit_id = :commit_id AS applied FROM executions WHERE id = :execution_id;

-- name: runs
-- The runs an execution ended with continue_as_new: "<id>#1", "<id>#2"... ('#' < '$').
SELECT {{fragment.execution_columns}} FROM executions
WHERE id > :id || '#' AND id < :id || '$' AND status = 'continued' ORDER BY run;

-- name: commit_outcome
-- Read in the same request as the commit: did each commit apply (now or in an earlier
-- attempt of the same request), and which message does its committer lease now, if any.
SELECT c.key AS position, e.commit_id = json_extract(c.value, '$.commit_id') AS applied,
       m.seq AS next_seq, m.lock_expiry AS next_expiry
FROM json_each(:commits) AS c
LEFT JOIN executions AS e ON e.id = json_extract(c.value, '$.execution_id')
LEFT JOIN messages AS m
  ON m.group_id = e.id AND m.locked_by = json_extract(c.value, '$.lease_token');

-- name: mark_claimed_running
-- `+status`: look the claimed executions up by id. Left to itself SQLite walks the
-- status index, i.e. every pending execution: a walk that grows with the backlog.
-- A REPLACE of each row by itself with the new status, not an UPDATE: an UPDATE of
-- `status` compiles the status triggers' programs on every node (most of the claim
-- request's SQLite compile), and none of them does anything for pending ->
-- running (they act on a final status, or on a return to pending). See
-- `lean_final_unlinked` for why REPLACE fires no trigger.
REPLACE INTO executions ({{fragment.execution_row}})
SELECT rowid, id, workflow, 'running', input, output, error, priority, created_at, :now,
       completed_at, steps_done, commit_id, parent_id, cancel_reason, deadline,
       trace_context, run, limit_key, limit_max, admitted, lane
FROM executions
WHERE +status = 'pending'
  AND id IN (SELECT group_id FROM messages WHERE locked_by = :token);

-- name: claimed_executions
-- With the fingerprint a kept continuation is checked against: the last full commit and
-- the last recorded call (a worker that ran it meanwhile changed one or the other).
SELECT {{fragment.claimed_columns}}, 0 AS steps_done, commit_id,
       (SELECT COALESCE(MAX(s.idx), -1) FROM steps AS s
        WHERE s.execution_id = executions.id) AS last_idx
FROM executions WHERE id IN (SELECT group_id FROM messages WHERE locked_by = :token);

-- name: claimed_steps
-- What the replays need, and no more: the first :page calls of each execution claimed,
-- except for those whose continuation the worker keeps in memory and finds unchanged
-- (:cached is {execution id: [commit_id, last_idx]}): they go on without a replay. The
-- rest of a long history is read in pages (`steps_page`).
SELECT {{fragment.step_columns}}
FROM steps WHERE execution_id IN (SELECT group_id FROM messages WHERE locked_by = :token)
  AND idx < :page
  AND execution_id NOT IN (
    SELECT e.id FROM json_each(:cached) AS c JOIN executions AS e ON e.id = c.key
    WHERE e.commit_id IS json_extract(c.value, '$[0]')
      AND (SELECT COALESCE(MAX(s.idx), -1) FROM steps AS s WHERE s.execution_id = e.id)
          = json_extract(c.value, '$[1]'))
ORDER BY execution_id, idx;

-- name: steps_page
SELECT {{fragment.step_columns}} FROM steps
WHERE execution_id = :id AND idx >= :first AND idx < :first + :page ORDER BY idx;

-- name: claimed_signals
-- The unread signals of what was claimed, in send order: what a recv may take.
SELECT seq, execution_id, topic, payload FROM signals
WHERE execution_id IN (SELECT group_id FROM messages WHERE locked_by = :token)
  AND consumed_idx IS NULL
ORDER BY seq;

-- name: claimed_children
-- The children of what was claimed, with their outcome if they have one: what a wait reads
-- (sharded: with those on other clusters, as their outcomes were relayed here).
SELECT id, parent_id, workflow, status, output, error, cancel_reason FROM executions
WHERE parent_id IN (SELECT group_id FROM messages WHERE locked_by = :token)
UNION ALL
SELECT id, parent_id, workflow, status, output, error, cancel_reason FROM remote_children
WHERE parent_id IN (SELECT group_id FROM messages WHERE locked_by = :token);

-- name: get
SELECT {{fragment.execution_columns}} FROM executions WHERE id = :id;

-- name: list_all
SELECT {{fragment.execution_columns}}
FROM executions ORDER BY created_at DESC, id LIMIT :limit;

-- name: list_by_status
SELECT {{fragment.execution_columns}}
FROM executions WHERE status = :status ORDER BY created_at DESC, id LIMIT :limit;

-- name: children
SELECT {{fragment.execution_columns}}
FROM executions WHERE parent_id = :id ORDER BY created_at, id;

-- name: steps
SELECT {{fragment.step_columns}} FROM steps WHERE execution_id = :id ORDER BY idx;

-- name: counts
SELECT status, COUNT(*) AS n FROM executions GROUP BY status;

-- name: send
INSERT INTO signal_sends (execution_id, topic, payload, key, now)
VALUES (:execution_id, :topic, :payload, :key, :now);

-- name: cancel_unstarted
-- An execution no worker has started -- pending, no event of its group leased: queued,
-- waiting for a concurrency slot, or debounced -- is cancelled in this statement (no
-- worker need run). A claim is ordered by Raft before or after it: before, the event is
-- leased and this changes nothing (`cancel` below asks the worker to end it); after, the
-- claim finds no event (`cancel_unstarted_events`). Going final fires the triggers of any
-- finish: the parent woken, the concurrency slot freed.
UPDATE executions SET status = 'cancelled', error = :error,
                      cancel_reason = COALESCE(cancel_reason, :reason),
                      updated_at = :now, completed_at = :now, commit_id = :commit_id
WHERE id = :id AND status = 'pending'
  AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = :id
                  AND locked_by IS NOT NULL AND locked_by <> '__parked__');

-- name: cancel_unstarted_events
-- Its queued (or parked) events go with it, only if the statement above cancelled it.
DELETE FROM messages WHERE group_id = :id
  AND EXISTS (SELECT 1 FROM executions WHERE id = :id AND commit_id = :commit_id);

-- name: cancel
INSERT INTO execution_cancels (id, reason, now) VALUES (:id, :reason, :now);

-- name: status
SELECT status, cancel_reason FROM executions WHERE id = :id;

-- name: resume_set_aside
-- engine.resume() runs again the step that failed the execution (its last call) or that
-- was cancelled while retrying; the trigger of `execution_resumes` deletes that record.
-- Its failed attempts are kept: in the same transaction, before the trigger, the record
-- takes a status the trigger leaves alone, its history the last attempt marked
-- `resumed_at` (appended from the record for a failed one: its start is not recorded
-- after the first attempt, the previous attempt's end stands in), due now.
-- `resume_kept` makes it `retrying`: the step runs its next attempt, its Retry counting
-- from the resume. Other calls (waits, children...) are left to the trigger.
UPDATE steps SET
  status = 'resuming',
  wake_at = :now,
  history = CASE status
    WHEN 'failed' THEN json_insert(COALESCE(history, '[]'), '$[#]', json_object(
      'attempt', attempts, 'type', json_extract(error, '$.type'),
      'message', json_extract(error, '$.message'),
      'started_at', COALESCE(json_extract(history, '$[#-1].ended_at'), started_at),
      'ended_at', ended_at, 'resumed_at', :now))
    ELSE json_set(history, '$[#-1].resumed_at', :now) END
WHERE execution_id = :id AND kind = 'step'
  AND EXISTS (SELECT 1 FROM executions WHERE id = :id AND status IN ('failed', 'cancelled'))
  AND (status = 'retrying'
       OR (status = 'failed' AND idx = (SELECT MAX(idx) FROM steps WHERE execution_id = :id)));

-- name: resume
INSERT INTO execution_resumes (id, event, now, commit_id)
VALUES (:id, :event, :now, :commit_id);

-- name: resume_kept
UPDATE steps SET status = 'retrying' WHERE execution_id = :id AND status = 'resuming';

-- name: resumed
SELECT commit_id = :commit_id AS resumed, status FROM executions WHERE id = :id;

-- name: move_execution
-- resume or fork to another version (its lane): the execution this request resumed or
-- created (its commit id), and its group, made by the request's event.
UPDATE executions SET lane = :lane WHERE id = :id AND commit_id = :commit_id;

-- name: move_group
UPDATE groups SET lane = :lane
WHERE group_id = :id AND EXISTS (SELECT 1 FROM executions WHERE id = :id AND commit_id = :commit_id);

-- name: fork_range
-- engine.fork()'s check, in its request: does the source exist, and how many calls did it
-- record (from_step is 0 .. that number; beyond it the fork would copy every record,
-- the one that failed included, and fail at once).
SELECT EXISTS (SELECT 1 FROM executions WHERE id = :source) AS found,
       (SELECT COALESCE(MAX(idx) + 1, 0) FROM steps WHERE execution_id = :source) AS calls;

-- name: fork
-- Nothing for a from_step out of that range.
INSERT INTO execution_forks (id, source, from_step, event, now, commit_id)
SELECT :id, :source, :from_step, :event, :now, :commit_id
WHERE :from_step <= (SELECT COALESCE(MAX(idx) + 1, 0) FROM steps WHERE execution_id = :source);

-- name: set_event
INSERT INTO events (execution_id, key, value, updated_at)
VALUES (:execution_id, :key, :value, :now)
ON CONFLICT (execution_id, key) DO UPDATE SET value = excluded.value,
                                              updated_at = excluded.updated_at;

-- name: get_event
SELECT value, updated_at FROM events WHERE execution_id = :execution_id AND key = :key;

-- ---------------------------------------------------------------- operators' lists
-- `raftflow list` and the dashboard: newest first, created at or after :since (0: all),
-- each filter combination on an index (executions_by_created / _by_status / _by_workflow).

-- name: list_recent
SELECT {{fragment.execution_columns}}
FROM executions WHERE created_at >= :since ORDER BY created_at DESC, id LIMIT :limit;

-- name: list_by_status_since
SELECT {{fragment.execution_columns}}
FROM executions WHERE status = :status AND created_at >= :since
ORDER BY created_at DESC, id LIMIT :limit;

-- name: list_by_workflow
SELECT {{fragment.execution_columns}}
FROM executions WHERE workflow = :workflow AND created_at >= :since
ORDER BY created_at DESC, id LIMIT :limit;

-- name: list_by_workflow_status
-- `+status`: walk the workflow's range newest first (bounded by :since and :limit), not
-- every execution of that status.
SELECT {{fragment.execution_columns}}
FROM executions WHERE workflow = :workflow AND +status = :status AND created_at >= :since
ORDER BY created_at DESC, id LIMIT :limit;

-- name: count_by_status_since
-- The dashboard's live counts: one index range per status, bounded by the time window.
SELECT COUNT(*) AS n FROM executions WHERE status = :status AND created_at >= :since;

-- ---------------------------------------------------------------- rate limits (migration 9)

-- name: rate_forget
-- Reservations older than the window (and a minute) can no longer delay anyone.
DELETE FROM rate_slots WHERE key = :key AND at < :now - :per - 60;

-- name: rate_reserve
-- The earliest time at or after the key's last reservation (FIFO) that leaves at most
-- :limit reservations in any :per seconds: :per after the :limit-th latest one.
INSERT INTO rate_slots (key, token, at)
SELECT :key, :token, max(
  :now,
  COALESCE((SELECT MAX(at) FROM rate_slots WHERE key = :key), :now),
  COALESCE((SELECT at FROM rate_slots WHERE key = :key
            ORDER BY at DESC LIMIT 1 OFFSET :limit - 1), :now - :per) + :per)
WHERE NOT EXISTS (SELECT 1 FROM rate_slots WHERE key = :key AND token = :token);

-- name: rate_reserved
SELECT at FROM rate_slots WHERE key = :key AND token = :token;

-- ---------------------------------------------------------------- transaction steps
-- A batch holding a transaction step (@engine.transaction) is one transactional request:
-- `transaction_fence`, then each step's writes (each with `transaction_rows` after it
-- when it has `expect_rows`), the batch's usual commit statements, then
-- `transaction_recorded`. Each guard aborts the whole request (the user's writes
-- included) by inserting a NULL into `transaction_checks` (migration 7) when its
-- condition fails. :commits is the batch's transaction steps only, each with `lean`.

-- name: fragment.transaction_applied
-- The commit `c` is recorded: a lean one by its step's row, a full one by the execution's.
CASE WHEN json_extract(c.value, '$.lean')
  THEN EXISTS (SELECT 1 FROM steps AS s
               WHERE s.execution_id = json_extract(c.value, '$.execution_id')
                 AND s.idx = json_extract(c.value, '$.step_idx')
                 AND s.commit_id = json_extract(c.value, '$.commit_id'))
  ELSE EXISTS (SELECT 1 FROM executions AS e
               WHERE e.id = json_extract(c.value, '$.execution_id')
                 AND e.commit_id = json_extract(c.value, '$.commit_id'))
END

-- name: fragment.transaction_held
EXISTS (SELECT 1 FROM messages AS m WHERE m.seq = json_extract(c.value, '$.lease_seq')
        AND m.locked_by = json_extract(c.value, '$.lease_token'))

-- name: transaction_fence
-- Every transaction step of the request: its lease holds, its commit is not recorded yet
-- (an ambiguous retry of an applied request stops here), and for a lean commit no cancel
-- waits (the lean INSERT would skip it while the writes applied).
INSERT INTO transaction_checks (failed)
SELECT NULL FROM json_each(:commits) AS c
WHERE NOT ({{fragment.transaction_held}})
   OR {{fragment.transaction_applied}}
   OR (json_extract(c.value, '$.lean')
       AND (SELECT e.cancel_reason FROM executions AS e
            WHERE e.id = json_extract(c.value, '$.execution_id')) IS NOT NULL)
LIMIT 1;

-- name: transaction_rows
-- After a write with expect_rows: the rows it changed (changes() of the statement before).
INSERT INTO transaction_checks (failed) SELECT NULL WHERE changes() <> :expected;

-- name: transaction_recorded
-- Last: each transaction step's record was written by this very commit.
INSERT INTO transaction_checks (failed)
SELECT NULL FROM json_each(:commits) AS c WHERE NOT ({{fragment.transaction_applied}})
LIMIT 1;

-- name: transaction_outcome
-- After a request that aborted for another reason than a step's own writes (or failed
-- ambiguously): which transaction steps are recorded, whose lease still holds, and which
-- message each committer leases now.
SELECT c.key AS position, {{fragment.transaction_applied}} AS applied,
       {{fragment.transaction_held}} AS held,
       (SELECT MAX(m.seq) FROM messages AS m
        WHERE m.group_id = json_extract(c.value, '$.execution_id')
          AND m.locked_by = json_extract(c.value, '$.lease_token')) AS next_seq,
       (SELECT MAX(m.lock_expiry) FROM messages AS m
        WHERE m.group_id = json_extract(c.value, '$.execution_id')
          AND m.locked_by = json_extract(c.value, '$.lease_token')) AS next_expiry
FROM json_each(:commits) AS c;
