-- Week blocks: level 10 is the ISO week (Monday to Sunday) holding a day, so a report by week reads one row per
-- week and group instead of the three or four power-of-two blocks a week is made of. The gateway writes them with
-- the other levels; the trigger below keeps them for a writer that does not (the release before this one, during a
-- rolling upgrade), adding each change of a one-day row to its week.
ALTER TABLE csat_detail_blocks DROP CONSTRAINT csat_detail_blocks_level_check,
    ADD CONSTRAINT csat_detail_blocks_level_check CHECK (level BETWEEN 0 AND 10);
ALTER TABLE csat_blocks DROP CONSTRAINT csat_blocks_level_check,
    ADD CONSTRAINT csat_blocks_level_check CHECK (level BETWEEN 0 AND 10);

INSERT INTO csat_detail_blocks (zone_id, level, first_day, channel_type, priority, agent_id, team_id, requests, responses,
                                s1, s2, s3, s4, s5)
SELECT zone_id, 10, date_trunc('week', first_day)::date, channel_type, priority, agent_id, team_id, sum(requests),
       sum(responses), sum(s1), sum(s2), sum(s3), sum(s4), sum(s5)
  FROM csat_detail_blocks WHERE level = 0
 GROUP BY 1, 2, 3, 4, 5, 6, 7;
INSERT INTO csat_blocks (zone_id, level, first_day, agent_id, team_id, requests, responses, s1, s2, s3, s4, s5)
SELECT zone_id, 10, date_trunc('week', first_day)::date, agent_id, team_id, sum(requests), sum(responses), sum(s1), sum(s2),
       sum(s3), sum(s4), sum(s5)
  FROM csat_blocks WHERE level = 0
 GROUP BY 1, 2, 3, 4, 5;

CREATE FUNCTION csat_detail_blocks_to_week() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        NEW.requests := NEW.requests - OLD.requests; NEW.responses := NEW.responses - OLD.responses;
        NEW.s1 := NEW.s1 - OLD.s1; NEW.s2 := NEW.s2 - OLD.s2; NEW.s3 := NEW.s3 - OLD.s3; NEW.s4 := NEW.s4 - OLD.s4;
        NEW.s5 := NEW.s5 - OLD.s5;
    END IF;
    INSERT INTO csat_detail_blocks AS d (zone_id, level, first_day, channel_type, priority, agent_id, team_id, requests,
                                         responses, s1, s2, s3, s4, s5)
    VALUES (NEW.zone_id, 10, date_trunc('week', NEW.first_day)::date, NEW.channel_type, NEW.priority, NEW.agent_id,
            NEW.team_id, NEW.requests, NEW.responses, NEW.s1, NEW.s2, NEW.s3, NEW.s4, NEW.s5)
    ON CONFLICT (zone_id, level, first_day, channel_type, priority, agent_id, team_id) DO UPDATE SET
        requests = d.requests + EXCLUDED.requests, responses = d.responses + EXCLUDED.responses, s1 = d.s1 + EXCLUDED.s1,
        s2 = d.s2 + EXCLUDED.s2, s3 = d.s3 + EXCLUDED.s3, s4 = d.s4 + EXCLUDED.s4, s5 = d.s5 + EXCLUDED.s5;
    RETURN NULL;
END
$$;

CREATE FUNCTION csat_blocks_to_week() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        NEW.requests := NEW.requests - OLD.requests; NEW.responses := NEW.responses - OLD.responses;
        NEW.s1 := NEW.s1 - OLD.s1; NEW.s2 := NEW.s2 - OLD.s2; NEW.s3 := NEW.s3 - OLD.s3; NEW.s4 := NEW.s4 - OLD.s4;
        NEW.s5 := NEW.s5 - OLD.s5;
    END IF;
    INSERT INTO csat_blocks AS d (zone_id, level, first_day, agent_id, team_id, requests, responses, s1, s2, s3, s4, s5)
    VALUES (NEW.zone_id, 10, date_trunc('week', NEW.first_day)::date, NEW.agent_id, NEW.team_id, NEW.requests,
            NEW.responses, NEW.s1, NEW.s2, NEW.s3, NEW.s4, NEW.s5)
    ON CONFLICT (zone_id, level, first_day, agent_id, team_id) DO UPDATE SET
        requests = d.requests + EXCLUDED.requests, responses = d.responses + EXCLUDED.responses, s1 = d.s1 + EXCLUDED.s1,
        s2 = d.s2 + EXCLUDED.s2, s3 = d.s3 + EXCLUDED.s3, s4 = d.s4 + EXCLUDED.s4, s5 = d.s5 + EXCLUDED.s5;
    RETURN NULL;
END
$$;

-- A writer that keeps week blocks itself says so for its transaction (desk_gateway.week_blocks = on).
CREATE TRIGGER csat_detail_blocks_to_week AFTER INSERT OR UPDATE ON csat_detail_blocks FOR EACH ROW
    WHEN (NEW.level = 0 AND current_setting('desk_gateway.week_blocks', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION csat_detail_blocks_to_week();
CREATE TRIGGER csat_blocks_to_week AFTER INSERT OR UPDATE ON csat_blocks FOR EACH ROW
    WHEN (NEW.level = 0 AND current_setting('desk_gateway.week_blocks', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION csat_blocks_to_week();
