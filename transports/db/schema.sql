-- raftflow's schema at version 17: what a database migrated from zero holds.
-- Generated from transports/db/migrations/ (python -m raftflow.transports.db.schema_file
-- > transports/db/schema.sql, or `make schema`); never applied, never edited by hand.

-- table: events
CREATE TABLE events (
  execution_id TEXT NOT NULL,
  key          TEXT NOT NULL,
  value        TEXT NOT NULL,                         -- JSON
  updated_at   REAL NOT NULL,
  PRIMARY KEY (execution_id, key)
) WITHOUT ROWID;

-- table: executions
CREATE TABLE executions (
  id           TEXT PRIMARY KEY,                    -- = the queue group of its events
  workflow     TEXT NOT NULL,                       -- registered workflow name
  status       TEXT NOT NULL,                       -- pending|running|succeeded|failed|cancelled
  input        TEXT NOT NULL,                       -- JSON
  output       TEXT,                                -- JSON, once succeeded
  error        TEXT,                                -- JSON {type, message, traceback}, once failed
  priority     INTEGER NOT NULL DEFAULT 0,
  created_at   REAL NOT NULL,
  updated_at   REAL NOT NULL,
  completed_at REAL,
  steps_done   INTEGER NOT NULL DEFAULT 0,
  commit_id    TEXT                                 -- last commit applied: retries check it
, parent_id TEXT, cancel_reason TEXT, deadline REAL, trace_context TEXT, run INTEGER NOT NULL DEFAULT 1, limit_key TEXT, limit_max INTEGER, admitted INTEGER NOT NULL DEFAULT 1, lane TEXT);

-- table: groups
CREATE TABLE groups (
  group_id        TEXT PRIMARY KEY,                -- one row per group that has messages
  last_claimed_at REAL NOT NULL DEFAULT 0.0,       -- last claim (0 = never claimed)
  priority        INTEGER NOT NULL DEFAULT 0,      -- set on first publish; 0-4
  ready_at        REAL NOT NULL DEFAULT 0.0        -- claimable once ready_at <= now
, lane TEXT NOT NULL DEFAULT '');

-- table: message_keys
CREATE TABLE message_keys (
  key          TEXT PRIMARY KEY,                   -- publish idempotency keys, kept for a window
  published_at REAL NOT NULL
);

-- table: messages
CREATE TABLE messages (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,  -- FIFO order + the Lease handle
  group_id     TEXT NOT NULL,                      -- the exclusivity group (execution id)
  event        TEXT NOT NULL,                      -- the event, JSON
  locked_by    TEXT,                               -- lease token / '__parked__' / NULL
  lock_expiry  REAL,                               -- lease/park deadline; NULL/0 when free
  priority     INTEGER NOT NULL DEFAULT 0,         -- the group's priority on first publish
  published_at REAL NOT NULL DEFAULT 0,
  attempts     INTEGER NOT NULL DEFAULT 0,         -- how many times it was claimed
  dedup_key    TEXT                                -- idempotency key of the publish
, lane TEXT);

-- table: moved_partitions
CREATE TABLE moved_partitions (
  partition  INTEGER PRIMARY KEY,
  cluster    TEXT NOT NULL,
  epoch      INTEGER NOT NULL,
  moved_at   REAL NOT NULL
);

-- table: outbox
CREATE TABLE outbox (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  target     TEXT NOT NULL,                  -- the execution it is for
  kind       TEXT NOT NULL,                  -- 'child_finished' or 'cancel'
  source     TEXT NOT NULL,                  -- the execution it is from
  payload    TEXT,                           -- JSON (a child's outcome)
  created_at REAL NOT NULL,
  UNIQUE (target, kind, source)
);

-- table: raftflow_schema
CREATE TABLE raftflow_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL, applied_by TEXT NOT NULL);

-- table: rate_slots
CREATE TABLE rate_slots (
  key   TEXT NOT NULL,
  token TEXT NOT NULL,
  at    REAL NOT NULL,
  PRIMARY KEY (key, token)
) WITHOUT ROWID;

-- table: remote_children
CREATE TABLE remote_children (
  parent_id     TEXT NOT NULL,
  id            TEXT NOT NULL,               -- the child's id, on another cluster
  workflow      TEXT NOT NULL,
  status        TEXT NOT NULL,               -- 'pending' until its outcome is relayed
  output        TEXT,
  error         TEXT,
  cancel_reason TEXT,
  updated_at    REAL NOT NULL,
  PRIMARY KEY (parent_id, id)
) WITHOUT ROWID;

-- table: shard_catalog
CREATE TABLE shard_catalog (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  partitions  INTEGER NOT NULL CHECK (partitions > 0),
  epoch       INTEGER NOT NULL,               -- +1 on every change of `assignment`
  assignment  TEXT NOT NULL,                  -- JSON: the cluster name of each partition
  created_at  REAL NOT NULL,
  updated_at  REAL NOT NULL
);

-- table: shard_identity
CREATE TABLE shard_identity (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  name       TEXT NOT NULL,                 -- this cluster's name in its catalog
  catalog    TEXT NOT NULL,                 -- the name of the cluster holding the catalog
  created_at REAL NOT NULL
, deployment TEXT);

-- table: signals
CREATE TABLE signals (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,     -- send order
  execution_id TEXT NOT NULL,
  topic        TEXT NOT NULL,                         -- '' for the default topic
  payload      TEXT NOT NULL,                         -- JSON
  key          TEXT NOT NULL,                         -- idempotency key of the send
  sent_at      REAL NOT NULL,
  consumed_idx INTEGER,                               -- the recv that took it
  consumed_at  REAL
);

-- table: steps
CREATE TABLE steps (
  execution_id TEXT NOT NULL,
  idx          INTEGER NOT NULL,                    -- call order within the workflow
  name         TEXT NOT NULL,
  status       TEXT NOT NULL,                       -- succeeded|failed
  output       TEXT,                                -- JSON
  error        TEXT,                                -- JSON {type, message, traceback}
  started_at   REAL NOT NULL,
  ended_at     REAL NOT NULL,
  worker_id    TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'step', attempts INTEGER NOT NULL DEFAULT 1, wake_at REAL, history TEXT, commit_id TEXT,
  PRIMARY KEY (execution_id, idx)
) WITHOUT ROWID;

-- table: streams
CREATE TABLE streams (
  execution_id TEXT NOT NULL,
  key          TEXT NOT NULL,
  position     INTEGER NOT NULL,                      -- 0, 1, 2... in the order written
  value        TEXT,                                  -- JSON; NULL on the close row
  closed       INTEGER NOT NULL DEFAULT 0,            -- 1: the close, the last row
  run          INTEGER NOT NULL,                      -- the run and call that wrote it
  call_idx     INTEGER NOT NULL,
  written_at   REAL NOT NULL,
  PRIMARY KEY (execution_id, key, position)
) WITHOUT ROWID;

-- table: transaction_checks
CREATE TABLE transaction_checks (failed INTEGER NOT NULL);

-- table: worker_duties
CREATE TABLE worker_duties (
  duty      TEXT PRIMARY KEY,
  worker_id TEXT NOT NULL,
  expiry    REAL NOT NULL
) WITHOUT ROWID;

-- table: workers
CREATE TABLE workers (
  worker_id    TEXT PRIMARY KEY,                     -- host:pid:random (the lease tokens' prefix)
  host         TEXT NOT NULL,
  pid          INTEGER NOT NULL,
  version      TEXT NOT NULL,                        -- raftflow's version
  concurrency  INTEGER NOT NULL,
  min_priority INTEGER NOT NULL DEFAULT 0,
  state        TEXT NOT NULL,                        -- running | draining | stopped
  started_at   REAL NOT NULL,
  seen_at      REAL NOT NULL,                        -- its last beat (cluster clock)
  steps        INTEGER NOT NULL DEFAULT 0,           -- steps committed since it started
  running      INTEGER NOT NULL DEFAULT 0            -- executions in its hands at the beat
, lanes TEXT, starts TEXT) WITHOUT ROWID;

-- index: executions_by_created
CREATE INDEX executions_by_created ON executions (created_at);

-- index: executions_by_limit
CREATE INDEX executions_by_limit ON executions (limit_key, admitted, status)
WHERE limit_key IS NOT NULL;

-- index: executions_by_parent
CREATE INDEX executions_by_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;

-- index: executions_by_status
CREATE INDEX executions_by_status ON executions (status, created_at);

-- index: executions_by_workflow
CREATE INDEX executions_by_workflow ON executions (workflow, created_at);

-- index: executions_finished
CREATE INDEX executions_finished ON executions (completed_at) WHERE completed_at IS NOT NULL;

-- index: groups_ready
CREATE INDEX groups_ready ON groups (priority, ready_at);

-- index: groups_served
CREATE INDEX groups_served ON groups (lane, priority, ready_at);

-- index: message_keys_age
CREATE INDEX message_keys_age ON message_keys (published_at);

-- index: messages_by_group
CREATE INDEX messages_by_group ON messages (group_id, seq);

-- index: messages_by_token
CREATE INDEX messages_by_token ON messages (locked_by) WHERE locked_by IS NOT NULL;

-- index: rate_slots_by_time
CREATE INDEX rate_slots_by_time ON rate_slots (key, at);

-- index: signals_by_execution
CREATE INDEX signals_by_execution ON signals (execution_id);

-- index: signals_by_key
CREATE UNIQUE INDEX signals_by_key ON signals (execution_id, key);

-- index: signals_unread
CREATE INDEX signals_unread ON signals (execution_id, topic, seq) WHERE consumed_idx IS NULL;

-- index: streams_by_call
CREATE UNIQUE INDEX streams_by_call ON streams (execution_id, run, call_idx);

-- index: workers_seen
CREATE INDEX workers_seen ON workers (seen_at);

-- view: execution_cancels
CREATE VIEW execution_cancels AS SELECT NULL AS id, NULL AS reason, NULL AS now;

-- view: execution_commits
CREATE VIEW execution_commits AS SELECT
  NULL AS execution_id, NULL AS lease_seq, NULL AS lease_token, NULL AS commit_id,
  NULL AS now, NULL AS worker_id,
  NULL AS step_idx, NULL AS step_name, NULL AS step_status, NULL AS step_output,
  NULL AS step_error, NULL AS step_started_at,
  NULL AS status, NULL AS output, NULL AS error,
  NULL AS next_event, NULL AS next_priority, NULL AS next_token, NULL AS next_expiry,
  NULL AS step_kind, NULL AS step_attempts, NULL AS step_wake_at, NULL AS step_attempt,
  NULL AS consume_signal, NULL AS park_until, NULL AS wake_topic, NULL AS wake_child;

-- view: execution_continues
CREATE VIEW execution_continues AS SELECT
  NULL AS execution_id, NULL AS lease_seq, NULL AS lease_token, NULL AS commit_id,
  NULL AS now, NULL AS input, NULL AS next_event;

-- view: execution_forks
CREATE VIEW execution_forks AS SELECT
  NULL AS id, NULL AS source, NULL AS from_step, NULL AS event, NULL AS now,
  NULL AS commit_id;

-- view: execution_resumes
CREATE VIEW execution_resumes AS SELECT
  NULL AS id, NULL AS event, NULL AS now, NULL AS commit_id;

-- view: execution_starts
CREATE VIEW execution_starts AS SELECT
  NULL AS id, NULL AS workflow, NULL AS input, NULL AS priority, NULL AS event,
  NULL AS now, NULL AS commit_id, NULL AS parent_id, NULL AS deadline,
  NULL AS lease_token, NULL AS lease_expiry,
  NULL AS limit_key, NULL AS limit_max, NULL AS debounce_until, NULL AS lane;

-- view: limit_gates
CREATE VIEW limit_gates AS SELECT NULL AS id;

-- view: limit_opens
CREATE VIEW limit_opens AS SELECT NULL AS key, NULL AS max;

-- view: partition_fence
CREATE VIEW partition_fence AS SELECT NULL AS partition;

-- view: schedule_fires
CREATE VIEW schedule_fires AS SELECT
  NULL AS seq, NULL AS token, NULL AS starts, NULL AS next_event, NULL AS next_at,
  NULL AS now;

-- view: signal_sends
CREATE VIEW signal_sends AS SELECT
  NULL AS execution_id, NULL AS topic, NULL AS payload, NULL AS key, NULL AS now;

-- trigger: child_finished_elsewhere
CREATE TRIGGER child_finished_elsewhere AFTER UPDATE OF status ON executions
WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
 AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
 AND NEW.parent_id IS NOT NULL
BEGIN
  INSERT INTO outbox (target, kind, source, payload, created_at)
    SELECT NEW.parent_id, 'child_finished', NEW.id,
           json_object('workflow', NEW.workflow, 'status', NEW.status,
                       'output', NEW.output, 'error', NEW.error,
                       'cancel_reason', NEW.cancel_reason),
           NEW.updated_at
    WHERE NOT EXISTS (SELECT 1 FROM executions WHERE id = NEW.parent_id)
    ON CONFLICT (target, kind, source) DO NOTHING;
END;

-- trigger: execution_admitted
CREATE TRIGGER execution_admitted AFTER UPDATE OF admitted ON executions
WHEN NEW.admitted = 1 AND OLD.admitted = 0
BEGIN
  UPDATE groups SET ready_at = last_claimed_at WHERE group_id = NEW.id;
END;

-- trigger: execution_cancel
CREATE TRIGGER execution_cancel INSTEAD OF INSERT ON execution_cancels BEGIN
  UPDATE executions SET cancel_reason = COALESCE(cancel_reason, NEW.reason),
                        updated_at = NEW.now
    WHERE id = NEW.id AND status NOT IN ('succeeded', 'failed', 'cancelled');
  UPDATE messages SET lock_expiry = NEW.now
    WHERE group_id = NEW.id AND locked_by = '__parked__' AND lock_expiry > NEW.now;
END;

-- trigger: execution_commit_fenced
CREATE TRIGGER execution_commit_fenced INSTEAD OF INSERT ON execution_commits
BEGIN
  SELECT RAISE(IGNORE) WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.lease_seq AND locked_by = NEW.lease_token);
  INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                     worker_id, kind, attempts, wake_at, history)
    SELECT NEW.execution_id, NEW.step_idx, NEW.step_name, NEW.step_status, NEW.step_output,
           NEW.step_error, NEW.step_started_at, NEW.now, NEW.worker_id,
           COALESCE(NEW.step_kind, 'step'), COALESCE(NEW.step_attempts, 1), NEW.step_wake_at,
           CASE WHEN NEW.step_attempt IS NOT NULL THEN json_array(json(NEW.step_attempt)) END
    WHERE NEW.step_idx IS NOT NULL
    ON CONFLICT (execution_id, idx) DO UPDATE SET
      status = excluded.status, output = excluded.output, error = excluded.error,
      ended_at = excluded.ended_at, worker_id = excluded.worker_id,
      attempts = excluded.attempts, wake_at = excluded.wake_at,
      history = CASE WHEN NEW.step_attempt IS NULL THEN history
                     ELSE json_insert(COALESCE(history, '[]'), '$[#]', json(NEW.step_attempt))
                END;
  UPDATE signals SET consumed_idx = NEW.step_idx, consumed_at = NEW.now
    WHERE seq = NEW.consume_signal AND execution_id = NEW.execution_id
      AND consumed_idx IS NULL;
  UPDATE executions SET
      status = COALESCE(NEW.status, status),
      output = COALESCE(NEW.output, output),
      error = COALESCE(NEW.error, error),
      updated_at = NEW.now,
      completed_at = CASE WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
                          THEN NEW.now ELSE completed_at END,
      steps_done = steps_done + (COALESCE(NEW.step_status IN ('succeeded', 'failed'), 0)),
      commit_id = NEW.commit_id
    WHERE id = NEW.execution_id;
  UPDATE groups SET last_claimed_at = NEW.now
    WHERE group_id = NEW.execution_id AND NEW.next_token IS NOT NULL;
  INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                        attempts)
    SELECT NEW.execution_id, NEW.next_event, NEW.next_priority, NEW.now,
           CASE WHEN hold THEN NEW.next_token
                WHEN NEW.park_until IS NOT NULL THEN '__parked__' END,
           CASE WHEN hold THEN NEW.next_expiry
                WHEN NEW.park_until IS NOT NULL
                THEN CASE WHEN woken THEN NEW.now ELSE NEW.park_until END END,
           hold
    FROM (SELECT
            NEW.next_token IS NOT NULL AND NEW.park_until IS NULL AND cancel IS NULL
              AND NOT EXISTS (SELECT 1 FROM messages
                              WHERE group_id = NEW.execution_id AND seq <> NEW.lease_seq)
              AS hold,
            cancel IS NOT NULL
              OR (NEW.wake_topic IS NOT NULL AND EXISTS (
                    SELECT 1 FROM signals WHERE execution_id = NEW.execution_id
                      AND topic = NEW.wake_topic AND consumed_idx IS NULL))
              OR (NEW.wake_child IS NOT NULL AND EXISTS (
                    SELECT 1 FROM executions WHERE id = NEW.wake_child
                      AND status IN ('succeeded', 'failed', 'cancelled')))
              OR (NEW.wake_child IS NOT NULL AND EXISTS (
                    SELECT 1 FROM remote_children
                    WHERE parent_id = NEW.execution_id AND id = NEW.wake_child
                      AND status IN ('succeeded', 'failed', 'cancelled')))
              AS woken
          FROM (SELECT cancel_reason AS cancel FROM executions WHERE id = NEW.execution_id))
    WHERE NEW.next_event IS NOT NULL;
  DELETE FROM messages WHERE seq = NEW.lease_seq;
END;

-- trigger: execution_continue
CREATE TRIGGER execution_continue INSTEAD OF INSERT ON execution_continues BEGIN
  SELECT RAISE(ABORT, 'raftflow: lease lost') WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.lease_seq AND locked_by = NEW.lease_token);
  INSERT INTO executions (id, workflow, status, input, output, priority, created_at,
                          updated_at, completed_at, commit_id, deadline, run)
    SELECT id || '#' || run, workflow, 'continued', input, NEW.input, priority, created_at,
           NEW.now, NEW.now, NEW.commit_id, deadline, run
    FROM executions WHERE id = NEW.execution_id;
  UPDATE steps SET execution_id = NEW.execution_id || '#' || (
      SELECT run FROM executions WHERE id = NEW.execution_id)
    WHERE execution_id = NEW.execution_id;
  UPDATE executions SET input = NEW.input, run = run + 1, status = 'running',
                        updated_at = NEW.now, commit_id = NEW.commit_id
    WHERE id = NEW.execution_id;
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT id, NEW.next_event, priority, NEW.now FROM executions WHERE id = NEW.execution_id;
  DELETE FROM messages WHERE seq = NEW.lease_seq;
END;

-- trigger: execution_finished
CREATE TRIGGER execution_finished AFTER UPDATE OF status ON executions
WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
 AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  UPDATE messages SET lock_expiry = NEW.updated_at
    WHERE NEW.parent_id IS NOT NULL AND group_id = NEW.parent_id
      AND locked_by = '__parked__' AND lock_expiry > NEW.updated_at;
  UPDATE executions SET cancel_reason = COALESCE(cancel_reason, 'its parent was cancelled'),
                        updated_at = NEW.updated_at
    WHERE NEW.status = 'cancelled' AND parent_id = NEW.id
      AND status NOT IN ('succeeded', 'failed', 'cancelled');
  UPDATE messages SET lock_expiry = NEW.updated_at
    WHERE NEW.status = 'cancelled' AND locked_by = '__parked__'
      AND lock_expiry > NEW.updated_at
      AND group_id IN (SELECT id FROM executions WHERE parent_id = NEW.id);
END;

-- trigger: execution_fork
CREATE TRIGGER execution_fork INSTEAD OF INSERT ON execution_forks
WHEN NOT EXISTS (SELECT 1 FROM executions WHERE id = NEW.id)
BEGIN
  SELECT RAISE(ABORT, 'raftflow: no such execution') WHERE NOT EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.source);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, deadline, limit_key, limit_max, admitted, lane)
    SELECT NEW.id, workflow, 'pending', input, priority, NEW.now, NEW.now, NEW.commit_id,
           NULL, limit_key, limit_max, limit_key IS NULL, lane
    FROM executions WHERE id = NEW.source;
  INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                     worker_id, kind, attempts, wake_at, history)
    SELECT NEW.id, idx, name, status, output, error, started_at, ended_at, worker_id, kind,
           attempts, wake_at, history
    FROM steps WHERE execution_id = NEW.source AND idx < NEW.from_step
      AND status IN ('succeeded', 'failed');
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT NEW.id, NEW.event, priority, NEW.now FROM executions WHERE id = NEW.source;
  INSERT INTO limit_gates (id) VALUES (NEW.id);
END;

-- trigger: execution_limit_cancelled
CREATE TRIGGER execution_limit_cancelled AFTER UPDATE OF cancel_reason ON executions
WHEN NEW.admitted = 0 AND NEW.cancel_reason IS NOT NULL AND NEW.status = 'pending'
BEGIN
  UPDATE groups SET ready_at = NEW.updated_at WHERE group_id = NEW.id AND ready_at > NEW.updated_at;
END;

-- trigger: execution_limit_freed
CREATE TRIGGER execution_limit_freed AFTER UPDATE OF status ON executions
WHEN NEW.limit_key IS NOT NULL
 AND NEW.status IN ('succeeded', 'failed', 'cancelled')
 AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  INSERT INTO limit_opens (key, max) VALUES (NEW.limit_key, NEW.limit_max);
END;

-- trigger: execution_limit_resumed
CREATE TRIGGER execution_limit_resumed AFTER UPDATE OF status ON executions
WHEN NEW.limit_key IS NOT NULL AND NEW.status = 'pending'
 AND OLD.status IN ('failed', 'cancelled')
BEGIN
  UPDATE executions SET admitted = 0 WHERE id = NEW.id;
END;

-- trigger: execution_resume
CREATE TRIGGER execution_resume INSTEAD OF INSERT ON execution_resumes
WHEN EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND status IN ('failed', 'cancelled'))
BEGIN
  DELETE FROM steps WHERE execution_id = NEW.id AND status IN ('waiting', 'retrying');
  DELETE FROM steps WHERE execution_id = NEW.id AND status = 'failed'
    AND idx = (SELECT MAX(idx) FROM steps WHERE execution_id = NEW.id);
  UPDATE executions SET status = 'pending', output = NULL, error = NULL,
                        completed_at = NULL, cancel_reason = NULL, updated_at = NEW.now,
                        commit_id = NEW.commit_id
    WHERE id = NEW.id;
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT id, NEW.event, priority, NEW.now FROM executions WHERE id = NEW.id;
  INSERT INTO limit_gates (id) VALUES (NEW.id);
END;

-- trigger: execution_start
CREATE TRIGGER execution_start INSTEAD OF INSERT ON execution_starts BEGIN
  UPDATE messages SET lock_expiry = NEW.debounce_until
    WHERE NEW.debounce_until IS NOT NULL AND group_id = NEW.id AND locked_by = '__parked__'
      AND EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND workflow = NEW.workflow
                    AND status = 'pending' AND updated_at <= NEW.now);
  UPDATE executions SET input = NEW.input, updated_at = NEW.now
    WHERE NEW.debounce_until IS NOT NULL AND id = NEW.id AND workflow = NEW.workflow
      AND status = 'pending' AND updated_at <= NEW.now
      AND EXISTS (SELECT 1 FROM messages WHERE group_id = NEW.id AND locked_by = '__parked__');
  SELECT RAISE(IGNORE) WHERE EXISTS (SELECT 1 FROM executions WHERE id = NEW.id);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, parent_id, deadline, limit_key, limit_max, admitted,
                          lane)
    VALUES (NEW.id, NEW.workflow,
            CASE WHEN NEW.lease_token IS NULL THEN 'pending' ELSE 'running' END,
            NEW.input, NEW.priority, NEW.now, NEW.now,
            NEW.commit_id, NEW.parent_id, NEW.deadline,
            NEW.limit_key, NEW.limit_max, NEW.limit_key IS NULL, NEW.lane);
  INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                        attempts)
    VALUES (NEW.id, NEW.event, NEW.priority, NEW.now,
            CASE WHEN NEW.lease_token IS NOT NULL THEN NEW.lease_token
                 WHEN NEW.debounce_until IS NOT NULL THEN '__parked__' END,
            COALESCE(NEW.lease_expiry, NEW.debounce_until),
            NEW.lease_token IS NOT NULL);
  INSERT INTO limit_gates (id) VALUES (NEW.id);
END;

-- trigger: limit_gate
CREATE TRIGGER limit_gate INSTEAD OF INSERT ON limit_gates
WHEN EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND admitted = 0)
BEGIN
  UPDATE groups SET ready_at = COALESCE(
      (SELECT deadline FROM executions WHERE id = NEW.id), 1e18)
    WHERE group_id = NEW.id;
  INSERT INTO limit_opens (key, max)
    SELECT limit_key, limit_max FROM executions WHERE id = NEW.id;
END;

-- trigger: limit_open
CREATE TRIGGER limit_open INSTEAD OF INSERT ON limit_opens BEGIN
  UPDATE executions SET admitted = 1 WHERE rowid IN (
    SELECT rowid FROM executions
    WHERE limit_key = NEW.key AND admitted = 0 AND status = 'pending'
    ORDER BY rowid
    LIMIT max(0, NEW.max - (SELECT COUNT(*) FROM executions
                            WHERE limit_key = NEW.key AND admitted = 1
                              AND status IN ('pending', 'running'))));
END;

-- trigger: messages_after_delete
CREATE TRIGGER messages_after_delete AFTER DELETE ON messages BEGIN
  DELETE FROM groups WHERE group_id = OLD.group_id
    AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = OLD.group_id);
  UPDATE groups SET ready_at = (
      SELECT CASE WHEN m.locked_by IS NULL THEN groups.last_claimed_at ELSE m.lock_expiry END
      FROM messages AS m WHERE m.group_id = OLD.group_id ORDER BY m.seq LIMIT 1)
    WHERE group_id = OLD.group_id;
END;

-- trigger: messages_after_insert
CREATE TRIGGER messages_after_insert AFTER INSERT ON messages BEGIN
  INSERT OR IGNORE INTO groups (group_id, priority, lane)
    VALUES (NEW.group_id, NEW.priority,
            COALESCE(NEW.lane, (SELECT lane FROM executions WHERE id = NEW.group_id), ''));
  INSERT OR IGNORE INTO message_keys (key, published_at)
    SELECT NEW.dedup_key, NEW.published_at WHERE NEW.dedup_key IS NOT NULL;
  UPDATE groups SET ready_at = NEW.lock_expiry
    WHERE group_id = NEW.group_id AND NEW.locked_by IS NOT NULL
      AND NEW.seq = (SELECT MIN(seq) FROM messages WHERE group_id = NEW.group_id);
END;

-- trigger: messages_after_lease
CREATE TRIGGER messages_after_lease AFTER UPDATE OF locked_by, lock_expiry ON messages
BEGIN
  UPDATE groups SET ready_at = (
      SELECT CASE WHEN m.locked_by IS NULL THEN groups.last_claimed_at ELSE m.lock_expiry END
      FROM messages AS m WHERE m.group_id = NEW.group_id ORDER BY m.seq LIMIT 1)
    WHERE group_id = NEW.group_id;
END;

-- trigger: parent_cancelled_elsewhere
CREATE TRIGGER parent_cancelled_elsewhere AFTER UPDATE OF status ON executions
WHEN NEW.status = 'cancelled' AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  INSERT INTO outbox (target, kind, source, payload, created_at)
    SELECT id, 'cancel', NEW.id, NULL, NEW.updated_at FROM remote_children
    WHERE parent_id = NEW.id AND status NOT IN ('succeeded', 'failed', 'cancelled')
    ON CONFLICT (target, kind, source) DO NOTHING;
END;

-- trigger: partition_fence_check
CREATE TRIGGER partition_fence_check INSTEAD OF INSERT ON partition_fence
WHEN EXISTS (SELECT 1 FROM moved_partitions WHERE partition = NEW.partition)
BEGIN
  SELECT RAISE(ABORT, 'raftflow: partition moved');
END;

-- trigger: raftflow_schema_next
CREATE TRIGGER raftflow_schema_next BEFORE INSERT ON raftflow_schema WHEN NEW.version <> (SELECT COALESCE(MAX(version), 0) FROM raftflow_schema) + 1 BEGIN SELECT RAISE(ABORT, 'raftflow schema: not the next version'); END;

-- trigger: schedule_fire
CREATE TRIGGER schedule_fire INSTEAD OF INSERT ON schedule_fires BEGIN
  SELECT RAISE(IGNORE) WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.seq AND locked_by = NEW.token);
  INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id,
                                parent_id, deadline, lease_token, lease_expiry, lane)
    SELECT json_extract(s.value, '$.id'), json_extract(s.value, '$.workflow'),
           json_extract(s.value, '$.input'), 0, json_extract(s.value, '$.event'), NEW.now,
           json_extract(s.value, '$.commit_id'), NULL, json_extract(s.value, '$.deadline'),
           NULL, NULL, json_extract(s.value, '$.lane')
    FROM json_each(NEW.starts) AS s;
  UPDATE messages SET event = NEW.next_event, locked_by = '__parked__',
                      lock_expiry = NEW.next_at
    WHERE seq = NEW.seq;
END;

-- trigger: signal_send
CREATE TRIGGER signal_send INSTEAD OF INSERT ON signal_sends BEGIN
  SELECT RAISE(IGNORE) WHERE EXISTS (
    SELECT 1 FROM signals WHERE execution_id = NEW.execution_id AND key = NEW.key);
  SELECT RAISE(ABORT, 'raftflow: no such execution') WHERE NOT EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.execution_id);
  SELECT RAISE(ABORT, 'raftflow: the execution is finished') WHERE EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.execution_id
      AND status IN ('succeeded', 'failed', 'cancelled'));
  INSERT INTO signals (execution_id, topic, payload, key, sent_at)
    VALUES (NEW.execution_id, NEW.topic, NEW.payload, NEW.key, NEW.now);
  UPDATE messages SET lock_expiry = NEW.now
    WHERE group_id = NEW.execution_id AND locked_by = '__parked__' AND lock_expiry > NEW.now;
END;
