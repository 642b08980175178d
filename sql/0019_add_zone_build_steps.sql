-- A new reporting zone's rollups are built in steps, from its oldest ratings and requests on, a stretch of time at a
-- time, each step holding the zone lock for a moment, so CSAT writes go on between steps. The build has counted every
-- rating and request dated before counted_until; the writers update the zone's rollups for a change dated before it and
-- leave a later one to the build, which reads the row as it is when it gets there. NULL: not built in steps (a zone
-- complete before this release, or registered by the release before it). stepped_at: when the build last took a step.
ALTER TABLE report_zones ADD COLUMN counted_until timestamptz, ADD COLUMN stepped_at timestamptz;

-- A writer of the release before this one (during a rolling upgrade, or after going back) updates every zone's rollups
-- for every change: during a build in steps, its change dated after the time the build has reached would be counted
-- twice, once by it and once by the build. While the build goes on (a step in the last 30 s), its rollup write is
-- refused as "busy" (SQLSTATE 55P03) and comes back by its own path, as it did when a backfill held it. A build no
-- instance has taken a step of for 30 s (its instance stopped, or the release was rolled back) is abandoned by that
-- write instead: the zone is left incomplete, its reports computed from raw ratings, and the next instance that starts
-- with it counts it again from the start. That release's own backfill, which holds the zone lock exclusively and
-- recounts the whole zone, is let through. The gateway says for its transaction that it writes by these rules
-- (desk_gateway.zone_steps = on), so the check costs it the WHEN clause only.
CREATE FUNCTION csat_blocks_refuse_stepless_writer() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stepped timestamptz;
BEGIN
    SELECT stepped_at INTO stepped FROM report_zones
     WHERE id = NEW.zone_id AND backfilled_at IS NULL AND counted_until IS NOT NULL;
    IF FOUND AND NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
                                AND mode = 'ExclusiveLock' AND classid = 17477 AND objid = 1397447246 AND objsubid = 1) THEN
        IF stepped > now() - interval '30 seconds' THEN
            RAISE EXCEPTION 'the rollups of reporting zone % are being built; retry shortly', NEW.zone_id
                USING ERRCODE = '55P03';
        END IF;
        UPDATE report_zones SET counted_until = NULL WHERE id = NEW.zone_id;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER csat_detail_blocks_refuse_stepless_writer BEFORE INSERT OR UPDATE ON csat_detail_blocks FOR EACH ROW
    WHEN (current_setting('desk_gateway.zone_steps', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION csat_blocks_refuse_stepless_writer();
CREATE TRIGGER csat_blocks_refuse_stepless_writer BEFORE INSERT OR UPDATE ON csat_blocks FOR EACH ROW
    WHEN (current_setting('desk_gateway.zone_steps', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION csat_blocks_refuse_stepless_writer();
