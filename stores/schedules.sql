-- Cron schedules: every statement of engine/runtime/schedules.py, sync and async. A
-- schedule is one message in its own queue group
-- ("raftflow:schedule:<workflow>"), parked until its next fire time; the view and trigger
-- that fire it are in the schema (transports/db/migrations/, `schedule_fires`). Times are
-- parameters, never SQL's clock (see transports/queue.sql).

-- name: ensure
-- A worker that registers a schedule makes sure its message exists, parked until its next
-- time, in its workflow's lane. Raft orders two workers' inserts: the second finds the
-- first one's message.
INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry, lane)
SELECT :group_id, :event, 0, :now, '__parked__', :at, :lane
WHERE NOT EXISTS (SELECT 1 FROM messages WHERE group_id = :group_id);

-- name: present
-- Which of the schedules' groups exist (a weak read each beat: a missing one is ensured).
SELECT group_id FROM messages WHERE group_id IN (SELECT value FROM json_each(:groups));

-- name: respec
-- The deployed code changed a schedule (cron, time zone, catch-up): park its message for
-- the new spec's next time. A message being fired now (leased) is left to its holder.
UPDATE messages SET event = :event, lock_expiry = :at
WHERE group_id = :group_id AND locked_by = '__parked__'
  AND (json_extract(event, '$.cron') IS NOT :cron
       OR json_extract(event, '$.timezone') IS NOT :timezone
       OR json_extract(event, '$.catch_up') IS NOT :catch_up);

-- name: relane
-- The deployed code moved the workflow to another queue: its schedule's group follows (its
-- message is never deleted, so no new first message would set the lane).
UPDATE groups SET lane = :lane WHERE group_id = :group_id AND lane <> :lane;

-- name: fire
-- Start the due times' executions and park the schedule until :next_at, fenced by the
-- lease (the `schedule_fire` trigger): one statement, one Raft entry.
INSERT INTO schedule_fires (seq, token, starts, next_event, next_at, now)
VALUES (:seq, :token, :starts, :next_event, :next_at, :now);

-- name: fired
-- Read in the same request: the message parked for :next_at by this fire (or an earlier
-- attempt of the same request).
SELECT seq FROM messages WHERE seq = :seq AND locked_by = '__parked__' AND event = :next_event;

-- name: list
-- `raftflow schedules`: every schedule's message and lane, with the last execution it
-- started.
SELECT m.group_id, m.event, m.locked_by, m.lock_expiry,
       (SELECT g.lane FROM groups AS g WHERE g.group_id = m.group_id) AS lane,
       (SELECT e.id FROM executions AS e
        WHERE e.workflow = json_extract(m.event, '$.workflow')
          AND e.id > json_extract(m.event, '$.workflow') || '@'
          AND e.id < json_extract(m.event, '$.workflow') || 'A'
        ORDER BY e.id DESC LIMIT 1) AS last_id
FROM messages AS m
WHERE m.group_id > 'raftflow:schedule:' AND m.group_id < 'raftflow:schedule;'
ORDER BY m.group_id;

-- name: remove
-- Delete a schedule (its message and, by the queue's trigger, its group).
DELETE FROM messages WHERE group_id = :group_id;
