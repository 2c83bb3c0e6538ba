import logging

# The package logs the service's warnings (a plan's, an observe's) on the `rollout_budget` logger,
# which Python prints on stderr when nothing handles it: between unittest's "name ... ok" lines.
# The tests that expect a warning catch it with assertLogs; the others' go nowhere.
logging.getLogger("rollout_budget").addHandler(logging.NullHandler())
