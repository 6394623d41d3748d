"""The client face: start executions, follow and control them from any process."""
