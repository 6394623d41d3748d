-- Migration 16: start settings -- a start by name applies what the workflow's code says.
--
-- Why: a Client (engine/client/client.py) starts a workflow by name without its code, so
-- it could not apply the timeout and the concurrency limit of its decorator (nor its
-- queue's limit). Each worker now publishes, with the beat that already writes its lanes,
-- the start settings of the workflows it runs at its own version (a JSON object,
-- engine/workflow/starts.py); the start by name reads them in the read of the workers'
-- lanes it already makes (stores/routes.sql), with no extra request, and applies those of
-- the version it routes to.
--
-- Rolling upgrade: workers of version 15 keep running beside version 16. Their beats
-- leave the new column NULL: a start by name routed to their version applies no settings,
-- as before this migration.

-- name: starts.workers
-- A worker's start settings: {"version": ..., "lanes": {lane: {timeout, concurrency,
-- keyed, queue_slots}}}, a lane left out having none; NULL: a worker before version 16.
ALTER TABLE workers ADD COLUMN starts TEXT;
