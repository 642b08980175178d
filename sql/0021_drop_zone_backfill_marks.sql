-- The backfill by rating and request id (before migration 0019) kept how far it had got in these columns; zones are
-- built by time in steps since then (counted_until), and no release since the one that brought 0019 reads or writes
-- them. Dropped a release after the last one that used them, as every drop is (upgrading.md).
ALTER TABLE report_zones DROP COLUMN last_rating_id, DROP COLUMN last_request_id;
