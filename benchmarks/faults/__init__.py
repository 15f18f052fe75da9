"""The fault trials' parts: the services a trial kills and restarts, and one trial."""
