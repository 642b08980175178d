# Sourced by test.sh and sanitize.sh. Suites that hold the gateway to a time bound (a preview's deadline, a webhook
# overtaking a held answer, Desk's one second to answer its webhooks while a backfill holds the CSAT writers, a
# cancelled Desk call answered at once, a report's 3 s statement timeout that its setup must stay under) run by
# themselves after the rest, which would otherwise measure sixty other suites' load on two cores; the contention
# scenario, which saturates both cores for its length, runs alone last.
# shellcheck disable=SC2034  # used by the scripts that source it
timed="HostilePreviewTests|ConcurrentWriteTests|DeadlineTests|CSATIntegrityTests|CurlClientTests|aReportPastTheStatementTimeoutIs503ReportTimeout"
